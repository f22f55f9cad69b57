import { createServer } from 'node:http'
import { withRateLimit } from 'floodgate/node'
import { expectLimited, listening, twoAtOnce } from './support.mjs'

const server = createServer(withRateLimit((_req, res) => res.end('ok'), { limiter: twoAtOnce() }))
await expectLimited(await listening(server))
server.close()
