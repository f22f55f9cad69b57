import { createServer } from 'node:http'
import { withRateLimit } from 'floodgate/node'
import { expectLimited, listening, twoPerMinute } from './support.mjs'

const server = createServer(withRateLimit((_req, res) => res.end('ok'), { limiter: twoPerMinute() }))
await expectLimited(await listening(server))
server.close()
