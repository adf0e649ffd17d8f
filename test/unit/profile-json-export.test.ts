/**
 * The JSON document: it parses back to the same samples and the same aggregate, its numbers agree
 * with the raw joins, and a document of another format is refused.
 */
import { strict as assert } from 'node:assert';
import { aggregate } from '../../src/profile/aggregate.js';
import { PROFILE_FORMAT, parseProfileJson, profileToJson } from '../../src/profile/json-export.js';
import { syntheticProfile } from '../support/synthetic-profile.js';

describe('profile JSON export', () => {
  const profile = syntheticProfile({
    seed: 5,
    layers: 3,
    steps: 12,
    transport: ({ layer }) => (layer === 1 ? 'nccl' : 'll'),
    epGraph: { dispatches: 9, captures: 2, refused: [{ layer: 1, reason: 'nccl cannot be captured per rank' }] },
  });

  it('parses back to the same samples and aggregate, under the format tag', () => {
    const text = profileToJson(profile, { indent: 1 });
    const doc = parseProfileJson(text);
    assert.equal(doc.format, PROFILE_FORMAT);
    assert.deepEqual(doc.profile, profile);
    assert.deepEqual(doc.aggregate, aggregate(profile));
    // What was read back aggregates to what was written: nothing lost on the way.
    assert.deepEqual(aggregate(doc.profile), doc.aggregate);
    assert.equal(doc.profile.joins.length, 3 * 5 * 12);
    assert.deepEqual(doc.profile.epGraph, profile.epGraph);
  });

  it('its aggregate agrees with the raw joins it carries', () => {
    const doc = parseProfileJson(profileToJson(profile));
    assert.equal(doc.aggregate.joins, doc.profile.joins.length);
    assert.equal(
      doc.aggregate.rows.reduce((s, r) => s + r.n, 0),
      doc.profile.joins.length,
    );
    for (const r of doc.aggregate.rows) {
      const mine = doc.profile.joins.filter(
        (j) => j.layer === r.layer && j.hop === r.hop && j.transport === r.transport,
      );
      assert.equal(r.n, mine.length);
      assert.equal(r.device.max, Math.max(...mine.map((j) => j.deviceUs)));
      assert.equal(r.host.min, Math.min(...mine.map((j) => j.hostEnqueueUs)));
      const sorted = mine.map((j) => j.deviceUs).sort((a, b) => a - b);
      const median = sorted[Math.ceil(sorted.length / 2) - 1]!;
      assert.ok(
        Math.abs(r.device.median - median) <= 1e-3 * median,
        `layer ${r.layer} ${r.hop}: median ${r.device.median} vs ${median}`,
      );
    }
    const tokens = doc.profile.steps.reduce((s, x) => s + x.rows, 0);
    assert.equal(doc.aggregate.throughput.summary!.tokens, tokens);
  });

  it('refuses other formats and values JSON cannot hold, by name', () => {
    assert.throws(() => parseProfileJson('[]'), /expected a JSON object/);
    assert.throws(() => parseProfileJson('{"profile":{}}'), /not a memra profile document \(no "format" field\)/);
    assert.throws(
      () => parseProfileJson('{"format":"memra-profile/0"}'),
      /format "memra-profile\/0" is not "memra-profile\/1"/,
    );
    assert.throws(
      () => parseProfileJson(`{"format":"${PROFILE_FORMAT}","profile":{"meta":{},"steps":[]},"aggregate":{"rows":[]}}`),
      /must hold meta, steps\[\] and joins\[\]/,
    );
    const p = syntheticProfile({ steps: 1 });
    p.meta.config = { spin: NaN };
    assert.throws(() => profileToJson(p), /field "spin" is NaN, which JSON cannot hold/);
  });
});
