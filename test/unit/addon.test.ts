/**
 * The addon on a machine like CI's: it must load with no GPU driver, in the main thread and in
 * a worker, report zero devices instead of failing, and reject bad arguments by name. Where the
 * install found no CUDA compiler the addon is not built, and these tests skip, saying so.
 */
import { strict as assert } from 'node:assert';
import { existsSync } from 'node:fs';
import { Worker } from 'node:worker_threads';
import { asDevicePtr, asStreamHandle, loadBinding } from '../../src/runtime/binding.js';
import { mlaShortPositions, mlaWorkspaceBytes } from '../../src/decode/mla-workspace.js';
import { checkLinkConstants } from '../../src/runtime/link-constants.js';

const addonPath = new URL('../../../build/Release/memra.node', import.meta.url).pathname;

function inWorker<T>(body: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const w = new Worker(
      `
      const { parentPort } = require('node:worker_threads');
      const b = require(${JSON.stringify(addonPath)});
      const out = (() => { ${body} })();
      parentPort.postMessage(out);
    `,
      { eval: true },
    );
    w.once('message', (m: T) => {
      void w.terminate();
      resolve(m);
    });
    w.once('error', reject);
  });
}

describe('native addon', () => {
  const built = existsSync(addonPath);
  before(function () {
    if (built) return;
    console.log(
      '      SKIPPED: build/Release/memra.node is not built (the install found no CUDA compiler or cmake); `npm run build:addon` builds it',
    );
    this.skip();
  });
  // Loaded only where it is built: loadBinding throws, naming the fix, where it is not.
  const b = (built ? loadBinding() : undefined) as ReturnType<typeof loadBinding>;

  it('loads in the main thread and describes itself', () => {
    assert.match(b.version, /^memra-addon \d+\.\d+\.\d+ cuda \d+\.\d+$/);
    assert.ok(b.cudaRuntimeVersion >= 13000);
    assert.equal(typeof b.deviceCount(), 'number');
  });

  it('loads in a worker thread and sees what the main thread sees (zero devices without a driver)', async () => {
    const w = await inWorker<{ count: number; driver: number; bound: number; bind: string }>(`
      let bind = 'bound';
      try { b.bindDevice(0); b.releaseDevice(); } catch (e) { bind = e.message; }
      return { count: b.deviceCount(), driver: b.driverVersion(), bound: b.boundDevice(), bind };
    `);
    assert.equal(w.count, b.deviceCount());
    assert.equal(w.driver, b.driverVersion());
    assert.equal(w.bound, -1);
    if (w.driver === 0) {
      assert.equal(w.count, 0, 'no driver: zero devices, not an error');
      assert.match(w.bind, /device ordinal 0 is out of range: no CUDA device is visible/);
    }
  });

  it('sizes the attention workspace as the walk does (src/decode/mla-workspace.ts), and refuses a shape it cannot take', () => {
    for (const [t, nh, P, R] of [
      [1, 1, 1, 32],
      [3, 4, 300, 64],
      [8, 32, 4096, 512],
      [2, 5, 100, 1024],
      [1, 16, 65536, 2048],
      [4, 8, 33, 96],
    ] as const) {
      assert.equal(b.mlaWorkspaceBytes(t, nh, P, R), mlaWorkspaceBytes(t, nh, P, R), `t=${t} nh=${nh} P=${P} R=${R}`);
    }
    assert.throws(() => b.mlaWorkspaceBytes(1, 1, 65537, 512), {
      name: 'TypeError',
      message: /mlaWorkspaceBytes: argument 'P'/,
    });
    assert.throws(() => b.mlaWorkspaceBytes(9, 1, 64, 512), {
      name: 'TypeError',
      message: /mlaWorkspaceBytes: argument 't'/,
    });
  });

  it('takes the one-kernel attention up to the P the walk expects (src/decode/mla-workspace.ts)', () => {
    for (const R of [32, 96, 512, 544, 1024, 2048])
      assert.equal(b.mlaShortPositions(R), mlaShortPositions(R), `R=${R}`);
    assert.throws(() => b.mlaShortPositions(2049), { name: 'TypeError', message: /mlaShortPositions: argument 'R'/ });
  });

  it("reports the link kernels' constants as their TypeScript mirror has them (src/runtime/link-constants.ts)", () => {
    const refusal = b.refusalWords();
    const reported = {
      signalBytes: b.arSignalBytes(),
      maxBlocks: b.arMaxBlocks(),
      llStateBytes: b.llStateBytes(),
      llDepth: b.llDepth(),
      llMaxValues: b.llMaxValues(),
      refusedEntry: refusal.entry,
      refusedExit: refusal.exit,
    };
    assert.doesNotThrow(() => checkLinkConstants(reported, 'the addon'));
    assert.throws(() => checkLinkConstants({ ...reported, llDepth: 8 }, 'the addon'), /llDepth 8 \(src\/runtime/);
  });

  it('refuses per-device calls on a thread that bound no device, saying what to do', () => {
    assert.throws(() => b.malloc(1024), /malloc: no device bound on this thread: call bindDevice\(ordinal\) first/);
    assert.throws(() => b.streamCreate(), /no device bound on this thread/);
  });

  it('rejects bad arguments with a TypeError naming the function and the argument', () => {
    assert.throws(() => b.launchFillF32(asDevicePtr(4096), -1, 0, asStreamHandle(1)), {
      name: 'TypeError',
      message: /launchFillF32: argument 'n' must be a non-negative safe integer, got -1/,
    });
    assert.throws(() => b.launchFillF32(asDevicePtr(0), 4, 0, asStreamHandle(1)), {
      name: 'TypeError',
      message: /argument 'ptr' must be a non-zero/,
    });
    assert.throws(() => b.malloc(1.5), { name: 'TypeError', message: /malloc: argument 'bytes'/ });
    assert.throws(() => b.eventCreate(1 as unknown as boolean), {
      name: 'TypeError',
      message: /eventCreate: argument 'timing' must be a boolean/,
    });
    assert.throws(() => b.bindDevice(-1), { name: 'TypeError', message: /bindDevice: argument 'ordinal'/ });
    assert.throws(() => b.bindDevice(0, 'yes' as unknown as boolean), {
      name: 'TypeError',
      message: /bindDevice: argument 'loopback' must be a boolean/,
    });
    // A list element is named by its place; the check runs before the thread is pinned.
    assert.throws(() => b.setThreadAffinity([0, 1.5]), {
      name: 'TypeError',
      message: /setThreadAffinity: argument 'cpus\[1\]' must be a CPU number in \[0, CPU_SETSIZE\), got 1\.5/,
    });
    assert.throws(() => b.setThreadAffinity([1024]), {
      name: 'TypeError',
      message: /argument 'cpus\[0\]' must be a CPU number .*, got 1024/,
    });
  });
});
