import hashlib
import hmac


def verify_signature(raw_body: bytes, header: str, secret: str) -> bool:
    """Check the X-Service-Signature header against the exact bytes received.

    For 24 hours after a secret rotation the header holds two values separated
    by ", " (the new secret's and the old one's): one that matches is enough.
    """
    expected = "sha256=" + hmac.new(secret.encode(), raw_body, hashlib.sha256).hexdigest()
    values = (header or "").split(",")
    return any(hmac.compare_digest(expected.encode(), value.strip().encode()) for value in values)


# With Flask:
#
#   @app.post("/webhooks/switchboard")
#   def switchboard_webhook():
#       raw = request.get_data()
#       if not verify_signature(raw, request.headers.get("X-Service-Signature", ""), SECRET):
#           abort(401)
#       event = json.loads(raw)
#       # ... handle event, deduplicating on request.headers["X-Service-Delivery"] ...
#       return "", 204
