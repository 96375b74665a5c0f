const crypto = require("node:crypto");

// verifySignature checks the X-Service-Signature header against the raw
// request body: a Buffer of the exact bytes received, before JSON parsing.
function verifySignature(rawBody, header, secret) {
  const expected = "sha256=" + crypto.createHmac("sha256", secret).update(rawBody).digest("hex");
  const a = Buffer.from(expected);
  const b = Buffer.from(String(header || ""));
  return a.length === b.length && crypto.timingSafeEqual(a, b);
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
