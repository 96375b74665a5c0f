import base64
import hashlib
import hmac
import time


def verify_standard(raw_body: bytes, headers, secret: str, tolerance: int = 300) -> bool:
    """Check the Standard Webhooks headers: webhook-id, webhook-timestamp, webhook-signature."""
    msg_id, timestamp = headers["webhook-id"], headers["webhook-timestamp"]
    if abs(time.time() - int(timestamp)) > tolerance:
        return False  # too old or too new: a replay, or a clock far off
    signed = f"{msg_id}.{timestamp}.".encode() + raw_body
    expected = base64.b64encode(hmac.new(secret.encode(), signed, hashlib.sha256).digest())
    for entry in headers["webhook-signature"].split():
        version, _, signature = entry.partition(",")
        if version == "v1" and hmac.compare_digest(signature.encode(), expected):
            return True
    return False
