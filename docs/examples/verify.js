const crypto = require("node:crypto");

// verifySignature checks the X-Service-Signature header against the raw
// request body: a Buffer of the exact bytes received, before JSON parsing.
// For 24 hours after a secret rotation the header holds two values
// separated by ", " (the new secret's and the old one's): one that matches
// is enough.
function verifySignature(rawBody, header, secret) {
  const expected = Buffer.from("sha256=" + crypto.createHmac("sha256", secret).update(rawBody).digest("hex"));
  return String(header || "").split(",").some((value) => {
    const got = Buffer.from(value.trim());
    return got.length === expected.length && crypto.timingSafeEqual(got, expected);
  });
}

module.exports = { verifySignature };

// With Express, keep the raw bytes on the webhook route:
//
//   app.post("/webhooks/switchboard", express.raw({ type: "application/json" }), (req, res) => {
//     if (!verifySignature(req.body, req.get("X-Service-Signature"), process.env.WEBHOOK_SECRET)) {
//       return res.sendStatus(401);
//     }
//     const event = JSON.parse(req.body);
//     // ... handle event, deduplicating on req.get("X-Service-Delivery") ...
//     res.sendStatus(204);
//   });
