/**
 * The error codes a caller may switch on: the addon's MEMRA_* codes are one list in
 * src/api/errors.ts, held here to the codes its sources throw, and every error memra raises on
 * purpose outside TypeError and RangeError is a MemraError.
 */
import { strict as assert } from 'node:assert';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADDON_ERROR_CODES, MemraError, SessionStateError } from '../../src/api/errors.js';
import { ConfigError } from '../../src/decode/decode-config.js';
import { BarrierRefusal } from '../../src/decode/barrier-watch.js';
import { OrderingError } from '../../src/runtime/cpu-device.js';
import { RingError } from '../../src/workers/ring.js';
import { ControlError } from '../../src/workers/worker-handle.js';
import { packageRoot } from '../../src/package-root.js';

describe('error codes', () => {
  it("lists exactly the MEMRA_* codes the addon's sources throw", () => {
    const dir = join(packageRoot(), 'addon');
    const thrown = new Set<string>();
    for (const f of readdirSync(dir).filter((x) => /\.(cpp|h)$/.test(x)))
      for (const m of readFileSync(join(dir, f), 'utf8').matchAll(/"(MEMRA_[A-Z0-9_]+)"/g)) thrown.add(m[1]!);
    assert.deepEqual([...ADDON_ERROR_CODES].sort(), [...thrown].sort());
  });

  it('gives every error class its code and its own name on one base', () => {
    const errors: MemraError[] = [
      new RingError('r', 'ERR_RING_STOPPED'),
      new OrderingError('o', 'ERR_ORDER_RAW'),
      new ControlError('c', 'ERR_CONTROL_TIMEOUT', 1),
      new SessionStateError('s', 'ERR_SESSION_CLOSED'),
      new ConfigError('f.json', '$.walk', 'bad'),
      new BarrierRefusal([40043, 0], 1),
    ];
    assert.deepEqual(
      errors.map((e) => [e instanceof MemraError && e instanceof Error, e.name, e.code]),
      [
        [true, 'RingError', 'ERR_RING_STOPPED'],
        [true, 'OrderingError', 'ERR_ORDER_RAW'],
        [true, 'ControlError', 'ERR_CONTROL_TIMEOUT'],
        [true, 'SessionStateError', 'ERR_SESSION_CLOSED'],
        [true, 'ConfigError', 'ERR_CONFIG'],
        [true, 'BarrierRefusal', 'ERR_BARRIER_REFUSED'],
      ],
    );
  });
});
