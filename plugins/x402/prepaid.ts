/**
 * A prepaid WebSocket connection (spec §5 item 1 over WebSocket): the upgrade paid `websocket.prepaid`; each message's calls are counted
 * down from it at the HTTP prices, a message whose calls failed is given back, and a message that would pass the balance is refused.
 * The payment settles once, in the background, after the first message whose calls were all answered; a connection that closes before
 * any is never settled (its authorization expires). What is left unused when the socket closes is not returned: `exact` payments settle
 * whole.
 */
import type { ExecutionRecord } from 'svc-proxy/plugin';
import { ErrPaymentRequired, type Accepted } from './payment.ts';
import { allAnswered, settleAnswered, type SettleDeps } from './settle.ts';

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
   * A charged message answered: gives `cost` back when a call failed, else settles the payment if this is the first fully answered one.
   * @param cost what {@link charge} took for it
   */
  answered(records: readonly ExecutionRecord[], cost: bigint): void {
    if (!allAnswered(records)) {
      this.remaining += cost;
      return;
    }
    if (this.settling) return;
    this.settling = true;
    void settleAnswered({ ...this.deps, timeoutMs: 0 }, this.paid, records, NO_SINK);
  }
}
