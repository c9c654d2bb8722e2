/**
 * A prepaid WebSocket connection (spec §5 item 1 over WebSocket): the upgrade paid `websocket.prepaid`; each message's calls are counted
 * down from it at the HTTP prices, a message that is not to be paid for (an svc-side or upstream failure, nothing served: the HTTP rule)
 * is given back, and a message that would pass the balance is refused. The payment settles once, in the background, when the connection
 * is first served: a message that is to be paid for, or a subscription accepted (its notifications are covered by the prepaid amount,
 * not counted down). A connection that closes before either is never settled (its authorization expires). What is left unused when the
 * socket closes is not returned: `exact` payments settle whole.
 */
import type { ExecutionRecord } from 'svc-proxy/plugin';
import { ErrPaymentRequired, type Accepted } from './payment.ts';
import { settleable, settleAnswered, type SettleDeps } from './settle.ts';

/** Receipt headers have nowhere to go on an open socket. */
const NO_SINK = { set(): void {} };

/** One prepaid connection's balance and settlement. */
export class PrepaidConnection {
  /** Atomic units left. */
  private remaining: bigint;
  private settling = false;

  /**
   * @param paid the upgrade's payment (its offer's amount is the balance)
   * @param deps how it settles
   */
  constructor(
    readonly paid: Accepted,
    private readonly deps: SettleDeps,
  ) {
    this.remaining = paid.offer.amount;
  }

  /**
   * Takes a message's price from the balance.
   * @param cost atomic units
   * @throws ErrPaymentRequired when the balance does not cover it (nothing is taken)
   */
  charge(cost: bigint): void {
    if (cost > this.remaining)
      throw new ErrPaymentRequired(`prepaid balance exhausted: ${this.remaining} left, these calls cost ${cost}; open a new connection with a new payment`);
    this.remaining -= cost;
  }

  /**
   * A charged message answered: gives `cost` back when it is not to be paid for, else settles the payment if the connection was not
   * served before.
   * @param cost what {@link charge} took for it
   */
  answered(records: readonly ExecutionRecord[], cost: bigint): void {
    if (!settleable(records)) {
      this.remaining += cost;
      return;
    }
    this.served(records);
  }

  /**
   * The connection was served (a paid message, or a subscription accepted): settles the payment, once, in the background.
   * @param records the served message's records (none for a subscription)
   */
  served(records: readonly ExecutionRecord[] = []): void {
    if (this.settling) return;
    this.settling = true;
    // settleAnswered settles only what its records say was served: a subscription's "record" is one served call.
    const proof =
      records.length > 0
        ? records
        : [{ attempts: [], upstreamAttempts: 0, networkAttempts: 0, startedAt: 0, durationMs: 0, method: 'eth_subscribe', routed: true }];
    this.deps.track(settleAnswered({ ...this.deps, timeoutMs: 0 }, this.paid, proof, NO_SINK));
  }
}
