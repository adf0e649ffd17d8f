/**
 * A profile as one JSON document: the raw samples (so any other summary can be made later) and
 * the aggregate (so a reader needs no histogram code), under a format tag that names the layout.
 * Bump the tag's version whenever a field changes meaning or goes away.
 */
import { aggregate, type Aggregate, type AggregateOptions } from './aggregate.js';
import type { Profile } from './profile-data.js';

export const PROFILE_FORMAT = 'memra-profile/1';

export interface ProfileDocument {
  format: typeof PROFILE_FORMAT;
  profile: Profile;
  aggregate: Aggregate;
}

export function profileDocument(profile: Profile, options: AggregateOptions = {}): ProfileDocument {
  return { format: PROFILE_FORMAT, profile, aggregate: aggregate(profile, options) };
}

export function profileToJson(profile: Profile, options: AggregateOptions & { indent?: number } = {}): string {
  const { indent, ...agg } = options;
  return documentToJson(profileDocument(profile, agg), indent);
}

/** A document already made (its aggregate shared with another export) as JSON. */
export function documentToJson(doc: ProfileDocument, indent?: number): string {
  return JSON.stringify(doc, refuseNonFinite, indent);
}

/** Reads a document back, refusing one of another format rather than misreading it. */
export function parseProfileJson(text: string): ProfileDocument {
  const doc = JSON.parse(text) as Partial<ProfileDocument> | null;
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc))
    throw new TypeError('parseProfileJson: expected a JSON object');
  if (doc.format === undefined)
    throw new TypeError('parseProfileJson: not a memra profile document (no "format" field)');
  if (doc.format !== PROFILE_FORMAT)
    throw new TypeError(
      `parseProfileJson: format ${JSON.stringify(doc.format)} is not ${JSON.stringify(PROFILE_FORMAT)}`,
    );
  const p = doc.profile;
  if (
    typeof p !== 'object' ||
    p === null ||
    typeof p.meta !== 'object' ||
    !Array.isArray(p.steps) ||
    !Array.isArray(p.joins)
  ) {
    throw new TypeError('parseProfileJson: "profile" must hold meta, steps[] and joins[]');
  }
  if (typeof doc.aggregate !== 'object' || doc.aggregate === null || !Array.isArray(doc.aggregate.rows)) {
    throw new TypeError('parseProfileJson: "aggregate" must hold rows[]');
  }
  return doc as ProfileDocument;
}

/** JSON writes NaN and ±Infinity as null without a word; a profile holding one is a bug to surface. */
function refuseNonFinite(this: unknown, key: string, value: unknown): unknown {
  if (typeof value === 'number' && !Number.isFinite(value))
    throw new RangeError(`profileToJson: field ${JSON.stringify(key)} is ${value}, which JSON cannot hold`);
  return value;
}
