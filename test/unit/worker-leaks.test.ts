/**
 * The unit run ends with no device worker running. A runtime a test opened and never closed
 * keeps its workers, and with them the process, alive: mocha would not exit and CI would wait.
 * This root hook names the leak, and ends the workers so the run still finishes.
 */
import { endLiveWorkers, liveWorkers } from '../../src/workers/worker-handle.js';

after(async () => {
  const n = liveWorkers();
  if (n === 0) return;
  await endLiveWorkers(); // so the process still exits
  throw new Error(`${n} device worker(s) still running after the unit suite: a runtime was opened and never closed`);
});
