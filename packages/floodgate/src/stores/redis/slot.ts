// Redis Cluster's key → slot rule (CRC16/XMODEM of the UTF-8 bytes, hash tags honoured), used to group a batch by node.

const SLOTS = 16384

const CRC16_TABLE = (() => {
  const table = new Uint16Array(256)
  for (let i = 0; i < 256; i++) {
    let crc = i << 8
    for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff
    table[i] = crc
  }
  return table
})()

function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ CRC16_TABLE[((crc >> 8) ^ bytes[i]) & 0xff]
  return crc
}

/**
 * The Cluster slot of `key`: if the key has a `{` followed later by a `}` with at least one byte
 * between them, only those bytes are hashed (the hash tag); otherwise the whole key is.
 */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8')
  const open = bytes.indexOf(0x7b)
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1)
    if (close > open + 1) return crc16(bytes, open + 1, close) % SLOTS
  }
  return crc16(bytes, 0, bytes.length) % SLOTS
}
