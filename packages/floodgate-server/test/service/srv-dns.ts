// A DNS server for tests, in the test process: answers SRV questions over UDP on a free loopback port from records
// the test sets and changes, or fails them (SERVFAIL) on demand. Encoded and decoded with dns-packet.

import { createSocket } from 'node:dgram'
import { once } from 'node:events'
import * as dnsPacket from 'dns-packet'

/** One SRV target: a host (name or address) and its port. */
export interface SrvTarget {
  target: string
  port: number
}

export interface SrvDnsServer {
  /** `127.0.0.1:port`, as --dns-server takes it. */
  readonly address: string
  /** Answers `name` with these records from now on (an empty list: a NOERROR answer with none). */
  set(name: string, targets: readonly SrvTarget[]): void
  /** Answers every question with SERVFAIL (true) until told otherwise. */
  fail(failing: boolean): void
  /** Questions answered so far. */
  readonly questions: number
  close(): Promise<void>
}

const SERVFAIL = 2
const NXDOMAIN = 3

export async function startSrvDnsServer(): Promise<SrvDnsServer> {
  const socket = createSocket('udp4')
  const records = new Map<string, readonly SrvTarget[]>()
  let failing = false
  let questions = 0
  socket.on('message', (message, peer) => {
    let query: dnsPacket.Packet
    try {
      query = dnsPacket.decode(message)
    } catch {
      return
    }
    questions++
    const question = query.questions?.[0]
    const targets = question === undefined ? undefined : records.get(question.name.toLowerCase())
    const rcode = failing ? SERVFAIL : targets === undefined ? NXDOMAIN : 0
    const answers: dnsPacket.Answer[] =
      failing || question === undefined || question.type !== 'SRV'
        ? []
        : (targets ?? []).map(({ target, port }) => ({
            type: 'SRV',
            name: question.name,
            ttl: 0,
            class: 'IN',
            data: { priority: 10, weight: 10, port, target },
          }))
    const response = dnsPacket.encode({
      type: 'response',
      id: query.id,
      flags: dnsPacket.AUTHORITATIVE_ANSWER | dnsPacket.RECURSION_DESIRED | rcode,
      questions: query.questions,
      answers,
    })
    socket.send(response, peer.port, peer.address)
  })
  socket.bind(0, '127.0.0.1')
  await once(socket, 'listening')
  return {
    address: `127.0.0.1:${socket.address().port}`,
    set(name, targets) {
      records.set(name.toLowerCase(), [...targets])
    },
    fail(value) {
      failing = value
    },
    get questions() {
      return questions
    },
    async close() {
      socket.close()
      await once(socket, 'close')
    },
  }
}
