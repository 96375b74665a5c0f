# BODY: the raw request body, SIGNATURE: its X-Service-Signature header, SECRET: your secret.
expected="sha256=$(printf '%s' "$BODY" | openssl dgst -sha256 -hmac "$SECRET" | awk '{print $NF}')"
[ "$expected" = "$SIGNATURE" ] && echo "signature ok" || echo "signature MISMATCH"
