'use strict';
/**
 * The reference client's tool-edit helpers over the core (`core::tool_edit`): what a tool
 * wrapper passes to `session.gate` (`toolGateOptions`, `resultGateOptions`), the check an
 * edited argument goes through (`validateInput`: the core's placeholder guard, pollution
 * paths, merge and JSON Schema check, the very function a held gate runs), the arguments a
 * decision hands the call (`editedArgs`), and a check for whatever schema a tool carries
 * (`toolSchemaCheck`). The rules are the core's; this module only moves values across.
 */
const { native, toJson } = require('./index.js');

/** JSON Schema keywords that mark a plain object as a schema (not, say, a zod raw shape). */
const JSON_SCHEMA_KEYWORDS = ['type', 'properties', 'required', 'additionalProperties', 'items', 'enum', 'const', 'anyOf', 'oneOf', 'allOf', '$schema', '$ref'];

/** The JSON Schema draft a Standard JSON Schema is asked for. */
const JSON_SCHEMA_TARGET = 'draft-2020-12';

/** Marks a check the core runs itself (a plain JSON Schema's). */
const CORE_CHECK = Symbol('graphmind.coreCheck');

/** What an input that cannot be read as JSON amounts to. */
const UNREADABLE = Object.freeze({ ok: false, code: 'shape', message: 'the edited arguments could not be read as JSON' });

function isRecord(value) {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON text of a value for the core (`null`: none). Throws when it has no JSON form. */
function jsonOf(value) {
  if (value === undefined) return null;
  const text = JSON.stringify(value);
  return text === undefined ? null : text;
}

/**
 * The whole check of an edited tool input, as a held gate runs it: refused (`placeholder`,
 * `truncated`, `shape`) when it carries a placeholder or truncation marker, a pollution
 * path, or is not an object; else merged into `live` (its top-level keys replace the live
 * ones; under `inputHidden` the edit must be a full replacement) and checked against
 * `schema`: a JSON Schema (the core checks it, synchronously) or a check from
 * `toolSchemaCheck` (a host validator: the verdict is then a promise). Never throws.
 */
function validateInput(live, proposed, { schema = null, inputHidden = false } = {}) {
  let liveText;
  let proposedText;
  try {
    liveText = jsonOf(live);
    proposedText = jsonOf(proposed);
  } catch {
    return UNREADABLE;
  }
  // A check the core runs (a JSON Schema's) goes in with the merge; a host validator's after.
  const hostCheck = typeof schema === 'function' && !schema[CORE_CHECK] ? schema : null;
  const jsonSchema = typeof schema === 'function' ? schema.jsonSchema || null : schema;
  let verdict;
  try {
    verdict = JSON.parse(native.validateInput(liveText, proposedText, Boolean(inputHidden), hostCheck || jsonSchema === null ? null : jsonOf(jsonSchema)));
  } catch (error) {
    return { ok: false, code: 'shape', message: `the input could not be validated (${error && error.message})` };
  }
  if (!verdict.ok || !hostCheck) return verdict;
  return Promise.resolve().then(() => hostCheck(verdict.value));
}

/** A schema refusal for a host validator's issues, worded by the core (never a value). */
function issuesRefusal(issues, value) {
  let valueText = null;
  try { valueText = jsonOf(value); } catch { /* the type at the path is then unknown */ }
  return JSON.parse(native.issuesRefusal(toJson(Array.isArray(issues) ? issues : []) ?? '[]', valueText));
}

/** The issues of a zod error, or of a wrapper whose `cause` holds them (AI SDK). */
function issuesOf(error) {
  if (Array.isArray(error)) return error;
  if (!isRecord(error) && !(error instanceof Error)) return [];
  if (Array.isArray(error.issues)) return error.issues;
  const { cause } = error;
  if (Array.isArray(cause)) return cause;
  if (cause && Array.isArray(cause.issues)) return cause.issues;
  return [];
}

/** A check `(value) => verdict` whose `jsonSchema` (read lazily) the core can run at a gate. */
function withJsonSchema(check, readJsonSchema) {
  let cached;
  Object.defineProperty(check, 'jsonSchema', {
    enumerable: true,
    get() {
      if (cached === undefined) {
        try { cached = readJsonSchema() || null; } catch { cached = null; }
      }
      return cached;
    },
  });
  return check;
}

/** The check of a plain JSON Schema, compiled once by the core; `undefined` when invalid. */
function jsonSchemaCheck(schema) {
  let compiled;
  try {
    compiled = new native.NativeInputSchema(JSON.stringify(schema));
  } catch {
    return undefined;
  }
  const check = (value) => {
    try {
      const text = jsonOf(value);
      return JSON.parse(compiled.check(text ?? 'null'));
    } catch {
      return UNREADABLE;
    }
  };
  Object.defineProperty(check, CORE_CHECK, { value: true });
  return withJsonSchema(check, () => schema);
}

/**
 * A check for whatever schema a tool carries: zod (`safeParseAsync`, else `safeParse`: the
 * verdict's value is zod's parsed output, defaults applied), any Standard Schema
 * (`~standard.validate`), the AI SDK's `jsonSchema()` (its `validate`, else its JSON
 * Schema), or a plain JSON Schema object (checked by the core). A refusal's message is the
 * core's (the field as a JSON pointer and the problem, never a value). The check carries
 * `jsonSchema` when the schema has a JSON Schema form (a Standard JSON Schema's `input`),
 * which a held gate runs in the core. `undefined` for anything else. A host validator that
 * throws rejects the check's promise.
 */
function toolSchemaCheck(schema) {
  try {
    if (schema === null || (typeof schema !== 'object' && typeof schema !== 'function')) return undefined;
    const standard = schema['~standard'];
    const standardJson = () => standard.jsonSchema.input({ target: JSON_SCHEMA_TARGET });
    const jsonForm = isRecord(standard) && isRecord(standard.jsonSchema) && typeof standard.jsonSchema.input === 'function'
      ? standardJson
      : () => (isRecord(schema.jsonSchema) ? schema.jsonSchema : null);
    if (typeof schema.safeParseAsync === 'function' || typeof schema.safeParse === 'function') {
      const parse = typeof schema.safeParseAsync === 'function'
        ? (value) => schema.safeParseAsync(value)
        : (value) => schema.safeParse(value);
      return withJsonSchema(async (value) => {
        const result = await parse(value);
        if (result && result.success === true) return { ok: true, value: result.data };
        return issuesRefusal(issuesOf(result && result.error), value);
      }, jsonForm);
    }
    if (isRecord(standard) && typeof standard.validate === 'function') {
      return withJsonSchema(async (value) => {
        const result = await standard.validate.call(standard, value);
        if (result && Array.isArray(result.issues) && result.issues.length > 0) return issuesRefusal(result.issues, value);
        if (result && 'value' in result) return { ok: true, value: result.value };
        return issuesRefusal([], value);
      }, jsonForm);
    }
    if (isRecord(schema.jsonSchema) && typeof schema.validate === 'function') {
      // The AI SDK's Schema: `validate(value)` -> {success, value} | {success: false, error}.
      return withJsonSchema(async (value) => {
        const result = await schema.validate(value);
        if (result && result.success === true) return { ok: true, value: result.value };
        return issuesRefusal(issuesOf(result && result.error), value);
      }, () => schema.jsonSchema);
    }
    if (isRecord(schema.jsonSchema)) return jsonSchemaCheck(schema.jsonSchema);
    if (isRecord(schema) && JSON_SCHEMA_KEYWORDS.some((k) => Object.prototype.hasOwnProperty.call(schema, k))) {
      return jsonSchemaCheck(schema);
    }
  } catch { /* an unreadable schema is no schema */ }
  return undefined;
}

/**
 * The options of one tool gate for `session.gate`: with `edit` (`{args, check?}`, or a
 * function returning it, called only while attached) the pause is offered as editable,
 * `args` the live arguments an edit is merged into, `check`'s JSON Schema the one the core
 * holds the edit to (a check without one cannot run inside the core: the edit is then
 * merged unchecked, with a warning); `after` (`{result}`) hands the smart breakpoints the
 * call's result. `undefined` while detached (the gate is a no-op then) or when there is
 * nothing to pass.
 */
function toolGateOptions(session, edit, after) {
  if (!session || !session.attached) return undefined;
  const plan = typeof edit === 'function' ? edit() : edit;
  if (plan === undefined && after === undefined) return undefined;
  const options = {};
  if (plan !== undefined) {
    options.editable = true;
    options.liveInput = plan.args;
    const { check } = plan;
    const schema = check === undefined || check === null ? null : (typeof check === 'function' ? check.jsonSchema : check);
    if (schema) {
      options.inputSchema = schema;
    } else if (check && typeof session.warn === 'function') {
      session.warn('tool-check-host-only', 'graphmind: a tool check without a JSON Schema form cannot run at a held gate; edits there are merged unchecked');
    }
  }
  if (after !== undefined) options.result = after.result;
  return options;
}

/**
 * The options of an `after` gate that hands the smart breakpoints a call's result (a tool's
 * result, or an LLM step's normalised output): `{result}` while attached, else `undefined`.
 */
function resultGateOptions(session, result) {
  try {
    return session && session.attached ? { result } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The arguments an accepted edit hands the call (`{args}`): a decision's `input` on
 * `continue` or `retry` (the core's rule); `undefined` when it carries none.
 */
function editedArgs(decision) {
  try {
    const text = native.editedArgs(JSON.stringify(decision));
    return text === null ? undefined : { args: JSON.parse(text) };
  } catch {
    return undefined;
  }
}

module.exports = { validateInput, toolGateOptions, editedArgs, toolSchemaCheck, resultGateOptions };
