// Write-back as the limiter sees it: a Backend whose answers come from local copies (see write-back.ts).

import type { Policy } from '../../core/policy.js'
import type { EvaluateResponse } from '../../stores/store.js'
import { asError, type Backend, type StoreAnswer } from '../guarded-store.js'
import type { PolicyPlan, Tier } from '../policy-plan.js'
import type { DecisionSource } from '../types.js'
import type { WriteBack } from './write-back.js'

/**
 * Decides on a WriteBack: synchronously when the key is held, with a promise while its first read
 * is under way. A refusal (WRITE_BACK_FULL, or after close) is reported as a 'store-error' and
 * answered undefined, so the limiter's failure mode decides, as for any store failure.
 */
export class WriteBackBackend implements Backend {
  readonly source: DecisionSource = 'write-back'

  constructor(
    readonly writeBack: WriteBack,
    private readonly onError: (error: Error) => void,
  ) {}

  tier(plan: PolicyPlan): Tier {
    return plan.remote
  }

  call(key: string, policies: readonly Policy[], cost: number): StoreAnswer {
    // Most decisions are answered from a fresh local copy: without the callback below, which
    // allocates its closure and context on every call.
    const local = this.writeBack.tryLocal(key, policies, cost)
    if (local !== undefined) return local
    let answer: EvaluateResponse | undefined
    let answered = false
    let later: ((response: EvaluateResponse | undefined) => void) | undefined
    this.writeBack.decide(key, policies, cost, (error, response) => {
      const value = error === null || error === undefined ? response : this.failed(error)
      if (later !== undefined) return later(value)
      answer = value
      answered = true
    })
    if (answered) return answer
    return new Promise((resolve) => (later = resolve))
  }

  /** Forgets the local copy: after a reset in the store, the next decision reads the key again. */
  forget(key: string, policies: readonly Policy[]): void {
    this.writeBack.forget(key, policies)
  }

  private failed(error: unknown): undefined {
    this.onError(asError(error))
    return undefined
  }
}
