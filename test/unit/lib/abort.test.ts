/**
 * Controller recycling (lib/abort.ts): only a controller nobody aborted and nobody
 * listens to is handed out again, and a link disposed twice is recycled once.
 */
import { expect } from 'chai';
import { acquireController, linkedController, releaseController } from '../../../lib/abort.ts';

/** Empties the free list (it holds at most 1,024), so each test starts from known state. */
function drain(): void {
  for (let i = 0; i < 1100; i++) acquireController();
}

describe('lib/abort: controller recycling', () => {
  beforeEach(drain);

  it('a clean controller is reused; an aborted one or one still listened to is not', () => {
    const clean = acquireController();
    releaseController(clean);
    expect(acquireController()).to.equal(clean);

    const aborted = acquireController();
    aborted.abort(new Error('x'));
    releaseController(aborted);
    expect(acquireController()).to.not.equal(aborted);

    const listened = acquireController();
    listened.signal.addEventListener('abort', () => undefined);
    releaseController(listened);
    expect(acquireController()).to.not.equal(listened);
  });

  it('a linked child follows its parent, unlinks on dispose, and is recycled once however often it is disposed', () => {
    const parent = new AbortController();
    const link = linkedController(parent.signal);
    link.dispose();
    link.dispose();
    const a = acquireController();
    const b = acquireController();
    expect(a).to.equal(link.controller);
    expect(b).to.not.equal(link.controller);
    // Disposed: the parent's abort no longer reaches the recycled controller.
    parent.abort(new Error('parent'));
    expect(a.signal.aborted).to.equal(false);

    const p2 = new AbortController();
    const live = linkedController(p2.signal);
    p2.abort(new Error('gone'));
    expect(live.signal.aborted).to.equal(true);
    expect((live.signal.reason as Error).message).to.equal('gone');
    live.dispose();
  });
});
