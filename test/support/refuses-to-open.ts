/**
 * A runtime that must not open: the refusal must name what was asked, and nothing may be left
 * running. Should it open anyway, it is closed before the assertion fails, so a wrong result
 * costs one failed test and not a process that never exits (its workers would keep it alive).
 */
import { strict as assert } from 'node:assert';
import { Runtime, type RuntimeOptions } from '../../src/runtime/runtime.js';
import { liveWorkers } from '../../src/workers/worker-handle.js';

export async function refusesToOpen(options: RuntimeOptions, message: RegExp): Promise<void> {
  const before = liveWorkers();
  let opened: Runtime | undefined;
  try {
    await assert.rejects(
      Runtime.open(options).then((rt) => {
        opened = rt;
      }),
      message,
    );
  } finally {
    await opened?.close();
  }
  assert.equal(liveWorkers(), before, 'a refused open left a worker running');
}
