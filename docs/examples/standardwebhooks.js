const { Webhook } = require("standardwebhooks");

// Standard Webhooks libraries take the secret as "whsec_" + base64(secret bytes).
const wh = new Webhook("whsec_" + Buffer.from(process.env.WEBHOOK_SECRET).toString("base64"));

// verifyStandard throws unless webhook-id, webhook-timestamp (within 5
// minutes) and webhook-signature are valid for the raw body; it returns the
// parsed event. headers: an object with lower-case names, as Node gives them.
function verifyStandard(rawBody, headers) {
  return wh.verify(rawBody, headers);
}

module.exports = { verifyStandard };
