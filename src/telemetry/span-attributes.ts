/**
 * A gateway span's attributes in one fixed layout (issue 44 part 1): a slot per attribute the
 * MCP semantic conventions give a span of the gateway (`docs/gen-ai/mcp.md` of
 * open-telemetry/semantic-conventions-genai), in {@link SPAN_KEYS}' order, `undefined` when the
 * span has none.
 *
 * Why not an object keyed by the attributes' names, as before: each span's object was grown key by
 * key into one of many shapes (a tool call or not, an error or not, SERVER or CLIENT), so every
 * read of it by name — the duration histograms read 13 keys of each span, the encoder each key
 * and value — was a megamorphic lookup, and the encoder found each key's encodings in a `Map`
 * (bench/micro-count.ts `spans`: about 12 k of a call's 41 k instructions went to reading the
 * attributes, not to writing them). Here each read is a load from one array at a known place, and
 * the encoder's per-key encodings are found by the same place.
 *
 * The order of {@link SPAN_KEYS} is the order the attributes are exported in (OTLP attributes are
 * a list whose order means nothing; the SDK's serializer writes an object's in its keys' order,
 * and {@link SpanAttributes.toObject} gives them in this one).
 */
import type { AttributeValue } from './attribute-cells.js';

/** Every attribute a gateway span may carry, in the order a span's export lists them. */
export const SPAN_KEYS = [
  'mcp.method.name',
  'gen_ai.tool.name',
  'gen_ai.prompt.name',
  'gen_ai.operation.name',
  'mcp.resource.uri',
  'jsonrpc.request.id',
  'mcp.session.id',
  'mcp.protocol.version',
  'client.address',
  'client.port',
  'server.address',
  'server.port',
  'network.transport',
  'network.protocol.name',
  'network.protocol.version',
  'switchboard.backend',
  'user.id',
  'enduser.pseudo.id',
  'error.type',
  'rpc.response.status_code',
  'gen_ai.tool.call.arguments',
  'gen_ai.tool.call.result',
] as const;

export type SpanKey = (typeof SPAN_KEYS)[number];

/** Each key's slot: `slot['error.type']` is where a span's `error.type` is. */
export const SLOT = Object.freeze(Object.fromEntries(SPAN_KEYS.map((key, i) => [key, i]))) as { readonly [K in SpanKey]: number };

/** A fresh layout: every slot `undefined`, copied from one array so each span's has the same elements kind. */
const EMPTY: readonly (AttributeValue | undefined)[] = SPAN_KEYS.map(() => undefined);

export class SpanAttributes {
  /** The value of each of {@link SPAN_KEYS}, by slot; `undefined`: the span has no such attribute. */
  readonly values: (AttributeValue | undefined)[] = EMPTY.slice();

  set(key: SpanKey, value: AttributeValue | undefined): this {
    this.values[SLOT[key]] = value;
    return this;
  }

  get(key: SpanKey): AttributeValue | undefined {
    return this.values[SLOT[key]];
  }

  /** The attributes as an object (keys in {@link SPAN_KEYS}' order, none for an empty slot): for readers of the SDK's shape, and tests. */
  toObject(): Record<string, AttributeValue> {
    const out: Record<string, AttributeValue> = {};
    for (let i = 0; i < SPAN_KEYS.length; i++) if (this.values[i] !== undefined) out[SPAN_KEYS[i]!] = this.values[i]!;
    return out;
  }

  /** Attributes of a known key set from an object (a test's, or the SDK's shape); an unknown key is an error. */
  static of(attributes: Readonly<Record<string, AttributeValue | undefined>>): SpanAttributes {
    const out = new SpanAttributes();
    for (const [key, value] of Object.entries(attributes)) {
      if (!(key in SLOT)) throw new Error(`not an attribute of a gateway span: ${key}`);
      out.set(key as SpanKey, value);
    }
    return out;
  }
}
