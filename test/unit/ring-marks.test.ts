import { strict as assert } from 'node:assert';
import { RingMarks } from '../../src/decode/ring-marks.js';
import { asEventHandle as ev } from '../../src/runtime/binding.js';
import { ProfileBoard, carriesMarks } from '../../src/workers/profile-board.js';
import { RingConsumer, RingProducer, RingView } from '../../src/workers/ring.js';

const wait = { spinMicros: 50, timeoutMs: 200 };

describe("the join profile's ring marks", () => {
  it('carries profile marks on the next record, two at most, in the order they were asked for', () => {
    const v = RingView.create(8, 'marks', -3);
    const p = new RingProducer(v, wait),
      c = new RingConsumer(v);
    assert.throws(() => new RingMarks(p, new Float64Array(8)), /marks board of 8 words for a ring of 8 records/);
    const board = ProfileBoard.create(8);
    const m = new RingMarks(p, board.marks);
    const seen: Array<[number, number] | undefined> = [];
    for (let i = 0; i < 40; i++) {
      // Every third record carries one mark, every fifth two; a third mark is refused.
      if (i % 3 === 0) assert.ok(m.mark(ev(100 + i)));
      if (i % 5 === 0) {
        assert.ok(m.mark(ev(200 + i)));
        assert.equal(m.mark(ev(300 + i)), i % 3 !== 0);
      }
      assert.equal(m.pending, i % 3 === 0 || i % 5 === 0);
      p.push(7, [i]);
      assert.equal(m.pending, false);
      const r = c.peek();
      assert.equal(c.args[r.arg], i);
      seen.push(carriesMarks(r.flags) ? [board.marks[2 * r.slot]!, board.marks[2 * r.slot + 1]!] : undefined);
      c.advance();
    }
    seen.forEach((m, i) => {
      const want =
        i % 3 === 0 && i % 5 === 0
          ? [100 + i, 200 + i]
          : i % 3 === 0
            ? [100 + i, 0]
            : i % 5 === 0
              ? [200 + i, 300 + i]
              : undefined;
      assert.deepEqual(m, want, `record ${i}`);
    });
    // Detaching drops marks not yet carried; a mark after it is refused.
    m.mark(ev(1));
    m.detach();
    p.push(7, [0]);
    assert.equal(carriesMarks(c.peek().flags), false);
    assert.throws(() => m.mark(ev(11)), /no profile board attached/);
  });
});
