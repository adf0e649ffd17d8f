/**
 * The errors memra throws on purpose, each with a stable `code` a caller can switch on (Node's own
 * ERR_* naming). A wrong type is a TypeError, a value outside what is allowed a RangeError, so
 * `instanceof` tells the two apart as it does for Node's own errors.
 *
 * An error that can say how to fix it keeps the fix apart from its message (`remedies`): the
 * message words it the way the API is called (`backend: 'cpu'`), and the command line words it
 * its own way (`--backend cpu`) from the same data.
 */

/** Codes of the errors raised before anything runs: the caller's input or the machine's limits. */
export type InputErrorCode =
  | 'ERR_INVALID_ARG_TYPE'
  | 'ERR_INVALID_ARG_VALUE'
  | 'ERR_UNKNOWN_OPTION'
  | 'ERR_CONFIG'
  | 'ERR_MODEL_TOO_LARGE'
  | 'ERR_SLOT_FULL'
  | 'ERR_NO_DEVICE';

/** Codes of a session that cannot take the call now. */
export type SessionErrorCode = 'ERR_SESSION_CLOSED' | 'ERR_SESSION_BUSY';

/**
 * Codes of a failure on a device or its worker; the first one closes the session, except
 * ERR_BARRIER_REFUSED, after which the session resets the barrier and stays usable.
 */
export type FaultCode =
  | 'ERR_BARRIER_REFUSED'
  | 'ERR_BAD_RECORD'
  | 'ERR_UNKNOWN_OP'
  | 'ERR_RECORD_FAILED'
  | 'ERR_ROUTE_VALIDATION'
  | 'ERR_ORDER_RAW'
  | 'ERR_ORDER_WAR'
  | 'ERR_ORDER_WAW'
  | 'ERR_WAIT_BEFORE_RECORD'
  | 'ERR_HANDSHAKE_TIMEOUT'
  | 'ERR_PEER_STOPPED'
  | 'ERR_NO_PEER'
  | 'ERR_WORKER_EXITED'
  | 'ERR_WORKER_LOOP'
  | 'ERR_DEVICE_FAULT'
  | 'ERR_CONTROL_TIMEOUT'
  | 'ERR_RING_FAULTED'
  | 'ERR_RING_STOPPED'
  | 'ERR_RING_STALLED'
  | 'ERR_RING_CORRUPT'
  | 'ERR_RING_LAYOUT'
  | 'ERR_RING_MISUSE';

/**
 * Codes of the addon's own state errors (addon/errors.h's ThrowError): a misuse the CUDA runtime
 * would not report, or would report as undefined behaviour. A CUDA failure's code is instead the
 * CUDA error's name (`cudaErrorMemoryAllocation`). test/unit/error-codes.test.ts holds this list
 * to the codes the addon's sources throw.
 */
export const ADDON_ERROR_CODES = [
  'MEMRA_ADDRESS_RANGE',
  'MEMRA_AFFINITY',
  'MEMRA_ALREADY_BOUND',
  'MEMRA_BAD_CHILD',
  'MEMRA_BAD_COPY',
  'MEMRA_BAD_ORDINAL',
  'MEMRA_BAD_PEER',
  'MEMRA_CAPTURING',
  'MEMRA_DEVICE_CLAIMED',
  'MEMRA_EMPTY_CAPTURE',
  'MEMRA_FOREIGN_HANDLE',
  'MEMRA_GRAPH_HELD',
  'MEMRA_LL_SERVER',
  'MEMRA_LL_SERVER_LAZY_LOADING',
  'MEMRA_LL_SERVER_STALLED',
  'MEMRA_NCCL_MISSING',
  'MEMRA_NO_DEVICE',
  'MEMRA_NO_LL_LINK',
  'MEMRA_NO_WHOLE_PAGE',
  'MEMRA_STATE',
] as const;
export type AddonErrorCode = (typeof ADDON_ERROR_CODES)[number];

/** The ring's own faults (RingError). */
export type RingErrorCode = Extract<FaultCode, `ERR_RING_${string}`>;
/** What the CPU reference's ordering checks catch (OrderingError). */
export type OrderingErrorCode = 'ERR_ORDER_RAW' | 'ERR_ORDER_WAR' | 'ERR_ORDER_WAW' | 'ERR_WAIT_BEFORE_RECORD';

export type ErrorCode = InputErrorCode | SessionErrorCode | FaultCode | AddonErrorCode;

/**
 * The base of memra's errors that are neither a TypeError nor a RangeError: a message and a
 * stable `code` to switch on. Each subclass narrows the codes it raises.
 */
export class MemraError<C extends ErrorCode = ErrorCode> extends Error {
  constructor(
    message: string,
    readonly code: C,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** An option and the value that would fix the error, e.g. `{ option: 'backend', value: 'cpu' }`. */
export interface Remedy {
  option: string;
  value: string;
}

/** The remedies as the API is called: `backend: 'cpu' or model: 'tiny'`. */
function remedyText(remedies: readonly Remedy[]): string {
  return remedies.map((r) => `${r.option}: '${r.value}'`).join(' or ');
}

function withRemedies(problem: string, remedies: readonly Remedy[]): string {
  return remedies.length === 0 ? problem : `${problem}; use ${remedyText(remedies)}`;
}

/** An argument of the wrong type (a string where an integer goes, a token that is 1.5). */
export class InvalidArgTypeError extends TypeError {
  readonly code = 'ERR_INVALID_ARG_TYPE';
  constructor(message: string) {
    super(message);
    this.name = 'TypeError';
  }
}

/** An options object with a key that is not one of its options. */
export class UnknownOptionError extends TypeError {
  readonly code = 'ERR_UNKNOWN_OPTION';
  constructor(
    message: string,
    readonly option: string,
    readonly allowed: readonly string[],
  ) {
    super(message);
    this.name = 'TypeError';
  }
}

/** An argument of the right type outside what is allowed. */
export class InvalidArgValueError extends RangeError {
  readonly code: 'ERR_INVALID_ARG_VALUE' | 'ERR_SLOT_FULL' | 'ERR_NO_DEVICE';
  /** The message without its remedies. */
  readonly problem: string;
  readonly remedies: readonly Remedy[];
  constructor(problem: string, opts: { code?: InvalidArgValueError['code']; remedies?: readonly Remedy[] } = {}) {
    super(withRemedies(problem, opts.remedies ?? []));
    this.name = 'RangeError';
    this.code = opts.code ?? 'ERR_INVALID_ARG_VALUE';
    this.problem = problem;
    this.remedies = opts.remedies ?? [];
  }
}

/** A model whose weights, activations and caches do not fit a device of the chosen backend. */
export class ModelTooLargeError extends RangeError {
  readonly code = 'ERR_MODEL_TOO_LARGE';
  readonly problem: string;
  constructor(
    problem: string,
    /** Bytes the model needs on its fullest device. */
    readonly bytesPerDevice: number,
    /** Bytes the backend gives a device. */
    readonly deviceLimit: number,
    readonly remedies: readonly Remedy[],
  ) {
    super(withRemedies(problem, remedies));
    this.name = 'RangeError';
    this.problem = problem;
  }
}

/** A call the session cannot take now: it is closed, or the previous call is still running. */
export class SessionStateError extends MemraError<SessionErrorCode> {}
