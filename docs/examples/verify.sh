# BODY: the raw request body, SIGNATURE: its X-Service-Signature header, SECRET: your secret.
# (After a secret rotation the header lists two values, ", "-separated: one match is enough.)
expected="sha256=$(printf '%s' "$BODY" | openssl dgst -sha256 -hmac "$SECRET" | awk '{print $NF}')"
case ", $SIGNATURE," in *", $expected,"*) echo "signature ok" ;; *) echo "signature MISMATCH" ;; esac
