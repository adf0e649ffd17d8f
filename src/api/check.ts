/**
 * Argument checks for every public entry point: the type first (a TypeError naming the argument
 * and what was given, so a string '2' is never reported as if it were the number 2), then the
 * range (a RangeError saying what is allowed), and for an options object every key against the
 * options it has, so a misspelt option is refused instead of silently ignored.
 *
 * A check runs before anything is enqueued or allocated: a refused call leaves everything as it
 * was. Checks are built once (module constants) and called with the argument's name, so the
 * ones on a rank's hot path cost a comparison or two and allocate nothing unless they throw.
 */
import { InvalidArgTypeError, InvalidArgValueError, UnknownOptionError } from './errors.js';

/** A value as a message shows it: its type as well as its value. */
export function describe(v: unknown): string {
  switch (typeof v) {
    case 'string':
      return `the string ${JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v)}`;
    case 'bigint':
      return `the bigint ${v}n`;
    case 'number':
    case 'boolean':
    case 'undefined':
    case 'symbol':
      return String(v);
    case 'function':
      return v.name ? `the function ${v.name}` : 'a function';
  }
  if (v === null) return 'null';
  if (Array.isArray(v)) return `an array of ${v.length}`;
  const ctor = (Object.getPrototypeOf(v) as { constructor?: { name?: string } } | null)?.constructor?.name;
  return ctor && ctor !== 'Object' ? `an instance of ${ctor}` : 'an object';
}

/** Checks `v` (named `at` in messages) and returns it typed, or throws. */
export type Check<T> = (v: unknown, at: string) => T;

const bound = (x: number): string =>
  x === Number.MAX_SAFE_INTEGER
    ? '2^53 - 1'
    : Number.isInteger(Math.log2(x)) && x >= 2 ** 20
      ? `2^${Math.log2(x)}`
      : String(x);

export function integer(lo: number, hi: number): Check<number> {
  return (v, at) => {
    if (typeof v !== 'number' || !Number.isInteger(v))
      throw new InvalidArgTypeError(`${at} must be an integer, got ${describe(v)}`);
    if (v < lo || v > hi)
      throw new InvalidArgValueError(`${at} must be an integer in [${bound(lo)}, ${bound(hi)}], got ${v}`);
    return v;
  };
}

/** An integer in [lo, hi] that is a power of two (a ring's capacity). */
export function powerOfTwo(lo: number, hi: number): Check<number> {
  const inRange = integer(lo, hi);
  return (v, at) => {
    const n = inRange(v, at);
    if ((n & (n - 1)) !== 0)
      throw new InvalidArgValueError(`${at} must be a power of two in [${bound(lo)}, ${bound(hi)}], got ${n}`);
    return n;
  };
}

/** Any number, NaN included (a fill value may be a poison). */
export const number: Check<number> = (v, at) => {
  if (typeof v !== 'number') throw new InvalidArgTypeError(`${at} must be a number, got ${describe(v)}`);
  return v;
};

export const boolean: Check<boolean> = (v, at) => {
  if (typeof v !== 'boolean') throw new InvalidArgTypeError(`${at} must be true or false, got ${describe(v)}`);
  return v;
};

export function func<F extends (...args: never[]) => unknown>(): Check<F> {
  return (v, at) => {
    if (typeof v !== 'function') throw new InvalidArgTypeError(`${at} must be a function, got ${describe(v)}`);
    return v as F;
  };
}

/** A typed array or DataView (data to copy). */
export const bufferView: Check<ArrayBufferView> = (v, at) => {
  if (!ArrayBuffer.isView(v))
    throw new InvalidArgTypeError(`${at} must be a typed array or DataView, got ${describe(v)}`);
  return v;
};

/** An object this package handed out (`what`), known by its numeric fields `keys`. */
export function record<T extends object>(what: string, keys: readonly string[]): Check<T> {
  const bad = (v: unknown, at: string): never => {
    throw new InvalidArgTypeError(`${at} must be ${what}, got ${describe(v)}`);
  };
  return (v, at) => {
    // An indexed loop: this runs on every event record and wait of a join, and allocates nothing.
    if (typeof v !== 'object' || v === null) bad(v, at);
    for (let i = 0; i < keys.length; i++) if (typeof (v as Record<string, unknown>)[keys[i]!] !== 'number') bad(v, at);
    return v as T;
  };
}

const quoted = (xs: readonly string[]): string => xs.map((x) => `'${x}'`).join(', ');

export function oneOf<T extends string>(allowed: readonly T[]): Check<T> {
  return (v, at) => {
    if (typeof v !== 'string')
      throw new InvalidArgTypeError(`${at} must be one of ${quoted(allowed)}, got ${describe(v)}`);
    if (!allowed.includes(v as T))
      throw new InvalidArgValueError(`${at} must be one of ${quoted(allowed)}, got '${v}'`);
    return v as T;
  };
}

/** An option whose check is another module's, made where it knows the options it depends on. */
export function deferred<T>(): Check<T> {
  return (v) => v as T;
}

/** One check per option, every option listed: a spec cannot forget one the type has. */
export type OptionChecks<T> = { readonly [K in keyof T]-?: Check<Exclude<T[K], undefined>> };

/** Edit distance, for "did you mean": a typo is one or two edits from the option meant. */
function distance(a: string, b: string): number {
  let prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const cur = [i];
    for (let j = 1; j <= b.length; j++)
      cur.push(Math.min(prev[j]! + 1, cur[j - 1]! + 1, prev[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1)));
    prev = cur;
  }
  return prev[b.length]!;
}

/** The option a misspelt key most likely meant, if one is close. */
export function closest(key: string, allowed: readonly string[]): string | undefined {
  let best: string | undefined,
    d = 3;
  for (const k of allowed) {
    const e = distance(key.toLowerCase(), k.toLowerCase());
    if (e < d) {
      best = k;
      d = e;
    }
  }
  return best;
}

export function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/** Refuses every key of `v` that is not in `allowed`, naming the ones there are. */
export function knownKeys(v: Record<string, unknown>, at: string, allowed: readonly string[]): void {
  for (const k of Object.keys(v)) {
    if (allowed.includes(k)) continue;
    const near = closest(k, allowed);
    throw new UnknownOptionError(
      `${at} has no option '${k}'${near ? ` (did you mean '${near}'?)` : ''}; the options are ${allowed.join(', ')}`,
      k,
      allowed,
    );
  }
}

/**
 * An options object: a plain object whose keys are all options, each present one (not
 * undefined) passing its check. Returns the object itself.
 */
export function options<T extends object>(checks: OptionChecks<T>): Check<T> {
  const allowed = Object.keys(checks);
  return (v, at) => {
    if (!isPlainObject(v)) throw new InvalidArgTypeError(`${at} must be an options object, got ${describe(v)}`);
    knownKeys(v, at, allowed);
    for (const k of allowed) {
      if (v[k] !== undefined) (checks as Record<string, Check<unknown>>)[k]!(v[k], `${at}.${k}`);
    }
    return v as T;
  };
}

/**
 * A step's tokens: an array of 1 to `maxRows` integer token ids below `vocab`, one a row. Row s's
 * token is named by its row, as the caller thinks of it.
 */
export function tokenRows(call: string, v: unknown, maxRows: number, vocab: number): readonly number[] {
  if (!Array.isArray(v))
    throw new InvalidArgTypeError(`${call}: tokens must be an array of token ids, one a row, got ${describe(v)}`);
  if (v.length < 1 || v.length > maxRows)
    throw new InvalidArgValueError(`${call}: a step carries 1 to maxBatch (${maxRows}) tokens, got ${v.length}`);
  for (let s = 0; s < v.length; s++) {
    const x: unknown = v[s];
    if (typeof x !== 'number')
      throw new InvalidArgTypeError(`${call}: token in row ${s} is ${describe(x)}, not an integer`);
    if (!Number.isInteger(x)) throw new InvalidArgTypeError(`${call}: token ${x} in row ${s} is not an integer`);
    if (x < 0 || x >= vocab)
      throw new InvalidArgValueError(`${call}: row ${s}: token ${x} is out of range [0, ${vocab})`);
  }
  return v as readonly number[];
}
