// Type-checked by TestOpenAPITools (cmd/switchboard) against the types that
// openapi-typescript, with its default options, generates from the document
// the server serves (build/schema.d.ts). It is written the way a user of
// those types writes a client; every line here is a promise of the README
// that the types must keep. It is not run: `tsc --noEmit` must pass.
import type { components, operations, paths } from "../build/schema";

type Schemas = components["schemas"];

// A send needs only `to` and one of `body` or `template`: `channel` has a
// default ("auto") and stays optional.
const plain: Schemas["SendMessageRequest"] = { to: "+15005550000", body: "Your order has shipped" };
const templated: Schemas["SendMessageRequest"] = {
  to: "+15005550000",
  template: "shipped",
  data: { name: "Ada", order: 1234, vip: true }, // strings, numbers or booleans
  channel: "sms",
};
// @ts-expect-error a variable is a string, a number or a boolean, never an object
const nested: Schemas["SendMessageRequest"] = { to: "+15005550000", template: "t", data: { a: { b: 1 } } };
// @ts-expect-error "fax" is not a channel
const fax: Schemas["SendMessageRequest"] = { to: "+15005550000", body: "x", channel: "fax" };

// PATCH /v1/contacts/{id}: leave a property out to keep it, null removes it.
const removeName: Schemas["ContactUpdate"] = { name: null };
const removeFields: Schemas["ContactUpdate"] = { fields: null };
const onlyPhone: Schemas["ContactUpdate"] = { phone: "+15005550002" };

// Codes are closed unions, so a switch over them is checked.
function retryable(code: Schemas["ErrorCode"]): boolean {
  switch (code) {
    case "RATE_LIMIT_EXCEEDED":
    case "QUOTA_EXCEEDED":
    case "DETECTION_UNAVAILABLE":
    case "CHANNEL_UNAVAILABLE":
    case "NO_PHONE_AVAILABLE":
    case "INTERNAL_ERROR":
      return true;
    default:
      return false;
  }
}
// @ts-expect-error not a code of the service
const unknownCode: Schemas["ErrorCode"] = "NO_SUCH_CODE";

// A failed message says why, with one of two codes; other messages have null.
function whyFailed(m: Schemas["Message"]): string {
  switch (m.error_code) {
    case "DELIVERY_FAILED":
      return `delivery failed: ${m.failure_reason ?? "no reason given"}`;
    case "CAMPAIGN_CANCELED":
      return `campaign ${m.campaign_id} was canceled`;
    case null:
      return m.status;
  }
}
const payloadCode: Schemas["WebhookEventPayload"]["error_code"] = "CAMPAIGN_CANCELED";

// A new key has never been used: last_used_at is a timestamp or null, as in
// the list.
const created: Schemas["APIKeyCreated"]["last_used_at"] = null;
const listed: Schemas["APIKey"]["last_used_at"] = "2025-01-31T12:00:00Z";

// Operations by their operationId, as generated clients name them.
type SendAnswer = operations["sendMessage"]["responses"][202]["content"]["application/json"]["data"];
type ListAnswer = operations["listMessages"]["responses"][200]["content"]["application/json"]["data"];
type PageQuery = NonNullable<operations["listMessages"]["parameters"]["query"]>;
type RequestId = operations["sendMessage"]["responses"][202]["headers"]["X-Request-Id"];
type Ops = keyof operations;
const ids: Ops[] = [
  "sendMessage", "getMessage", "listMessages",
  "createApiKey", "listApiKeys", "revokeApiKey",
  "createWebhook", "listWebhooks", "deleteWebhook", "listWebhookDeliveries", "retryWebhookDelivery",
  "createTemplate", "listTemplates", "getTemplate", "deleteTemplate",
  "createContact", "listContacts", "getContact", "updateContact", "deleteContact", "importContacts",
  "createCampaign", "listCampaigns", "getCampaign", "launchCampaign", "cancelCampaign",
];

// A small client over fetch, typed by the paths.
type Sent = paths["/v1/messages"]["post"]["responses"][202]["content"]["application/json"];
type Failure = Schemas["Error"];

export async function send(base: string, key: string, body: Schemas["SendMessageRequest"]): Promise<SendAnswer> {
  const res = await fetch(`${base}/v1/messages`, {
    method: "POST",
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
    body: JSON.stringify(body),
  });
  const requestId: RequestId = res.headers.get("X-Request-Id") ?? "";
  if (res.status !== 202) {
    const err = (await res.json()) as Failure;
    throw new Error(`${err.code} (${requestId}): ${err.error}${retryable(err.code) ? ", retry later" : ""}`);
  }
  return ((await res.json()) as Sent).data;
}

export async function* everyMessage(base: string, key: string, query: PageQuery = {}): AsyncGenerator<ListAnswer[number]> {
  let url: string | null = `${base}/v1/messages?${new URLSearchParams({ limit: String(query.limit ?? 50) })}`;
  while (url) {
    const res: Response = await fetch(url, { headers: { Authorization: `Bearer ${key}` } });
    const page = (await res.json()) as { data: ListAnswer };
    yield* page.data;
    const next = /^<([^>]+)>; rel="next"$/.exec(res.headers.get("Link") ?? "");
    url = next ? base + next[1] : null;
  }
}

export const examples = { plain, templated, nested, fax, removeName, removeFields, onlyPhone, unknownCode, payloadCode, created, listed, ids, whyFailed };
