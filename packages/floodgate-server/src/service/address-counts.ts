// Open connections per client address, so a server at its connection cap sheds a flooding address's
// sockets before a legitimate client's (the attacker's are the many; the oldest idle may be anyone's).

/** How many connections each remote address holds now. */
export class AddressCounts {
  readonly #counts = new Map<string, number>()
  #total = 0

  /** Counts a new connection from `address` (undefined: the socket already closed); returns the key to remove it with. */
  add(address: string | undefined): string {
    const key = address ?? ''
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1)
    this.#total++
    return key
  }

  /** The connection counted under `key` closed. */
  remove(key: string): void {
    const count = this.#counts.get(key)
    if (count === undefined) return
    this.#total--
    if (count <= 1) this.#counts.delete(key)
    else this.#counts.set(key, count - 1)
  }

  /** Connections `address` holds now. */
  of(address: string | undefined): number {
    return this.#counts.get(address ?? '') ?? 0
  }

  /**
   * Whether `address` holds more than an even share of the connections (the total over the addresses
   * seen): with one flooding address among a few clients, that address alone.
   */
  overShare(address: string | undefined): boolean {
    const count = this.of(address)
    return count > 1 && count * this.#counts.size > this.#total
  }
}
