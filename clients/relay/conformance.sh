#!/usr/bin/env bash
# Walk the whole relay protocol against a running relay with curl and jq.
#
#   clients/relay/conformance.sh [BASE]      # BASE defaults to http://127.0.0.1:7433; creates sessions
#
# Session creation is served only on the host's localhost listener, so run this on the host.
# Prints one line per failed check and "N passed, N failed" at the end; exits 1 on any failure.
set -u
BASE="${1:-${IRIS_BASE:-http://127.0.0.1:7433}}"
BASE="${BASE%/}"
PASS=0
FAIL=0
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT

ok()   { PASS=$((PASS + 1)); [ -n "${VERBOSE:-}" ] && echo "ok   $1"; return 0; }
bad()  { FAIL=$((FAIL + 1)); echo "FAIL $1${2:+ ($2)}"; }
# check NAME CONDITION...: run the condition; pass when it succeeds.
check() { local name="$1"; shift; if "$@" >/dev/null 2>&1; then ok "$name"; else bad "$name"; fi; }

# req METHOD URL [curl args...]: body to $TMP/body, headers to $TMP/headers, status in $STATUS.
req() {
  local method="$1" url="$2"; shift 2
  STATUS="$(curl -s -o "$TMP/body" -D "$TMP/headers" -w '%{http_code}' -X "$method" "$url" "$@")"
}
body() { cat "$TMP/body"; }
jqb()  { jq -e "$@" "$TMP/body"; }
auth() { echo "Authorization: Bearer $KEY"; }
is()   { [ "$1" = "$2" ]; }
expect_error() {  # NAME STATUS CODE
  if [ "$STATUS" = "$2" ] && jqb --arg c "$3" '.error.code == $c and (.error.message | type == "string")' >/dev/null 2>&1; then
    ok "$1"; else bad "$1" "got $STATUS $(head -c 200 "$TMP/body")"; fi
}
post_msg() {  # JSON-BODY
  req POST "$URL" -H "$(auth)" -H 'Content-Type: application/json' --data-binary "$1"
}
msg() {  # NAME CONTENT-JSON [METADATA-JSON]
  if [ -n "${3:-}" ]; then
    printf '{"message":{"role":"assistant","name":"%s","content":%s},"metadata":%s}' "$1" "$2" "$3"
  else
    printf '{"message":{"role":"assistant","name":"%s","content":%s}}' "$1" "$2"
  fi
}

# -- creation --------------------------------------------------------------------------------
req POST "$BASE/sessions"
if [ "$STATUS" != 201 ]; then
  echo "FAIL POST /sessions returned $STATUS; is a relay running at $BASE?"
  echo "0 passed, 1 failed"; exit 1
fi
ok "POST /sessions is 201"
UID_="$(jq -r .uid "$TMP/body")"; URL="$(jq -r .url "$TMP/body")"; KEY="$(jq -r .key "$TMP/body")"
cp "$TMP/body" "$TMP/created"
check "creation returns uid, url, key, created_at" jqb '(.uid|type=="string") and (.url|endswith("/s/" + $ARGS.named.u)) and (.key|length>=16) and (.created_at|test("^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}(\\.[0-9]+)?Z$"))' --arg u "$UID_"
check "limits carry every field as a number" jqb '.limits | [.messages_per_minute, .max_body_bytes, .max_file_bytes, .max_storage_bytes, .max_messages, .inactivity_ttl_seconds, .grace_seconds, .max_wait_seconds] | all(type=="number")'
PER_MINUTE="$(jq -r .limits.messages_per_minute "$TMP/created")"
MAX_BODY="$(jq -r .limits.max_body_bytes "$TMP/created")"
MAX_WAIT="$(jq -r .limits.max_wait_seconds "$TMP/created")"

# -- auth ------------------------------------------------------------------------------------
req GET "$URL"
expect_error "no key is 401 unauthorized" 401 unauthorized
req GET "$URL" -H "Authorization: Bearer wrong-key-wrong-key"
expect_error "a wrong key is 401 unauthorized" 401 unauthorized
req GET "$BASE/s/0000000000000000" -H "$(auth)"
expect_error "an unknown session is 404 not_found" 404 not_found

# -- posting ---------------------------------------------------------------------------------
post_msg "$(msg alpha '"hello from alpha"')"
check "post is 201" is "$STATUS" 201
check "first message has seq 1, a UTC ts, metadata {}" jqb '.seq == 1 and (.ts|test("Z$")) and .message.content == "hello from alpha" and .message.role == "assistant" and .metadata == {}'
post_msg "$(msg beta.bot-2 '"urgent one"' '{"urgent":true,"attn":"human","reply_to":1,"custom":{"x":[1,2]}}')"
check "second message is seq 2 with metadata passed through" jqb '.seq == 2 and .metadata.urgent == true and .metadata.attn == "human" and .metadata.reply_to == 1 and .metadata.custom.x == [1,2]'
post_msg "$(msg gamma '[{"type":"text","text":"see file"},{"type":"file","file":{"name":"a.txt","seq":1}},{"type":"x-custom","data":{"k":"v"}}]')"
check "typed parts, unknown types pass through" jqb '.seq == 3 and (.message.content|length) == 3 and .message.content[2].type == "x-custom" and .message.content[2].data.k == "v"'
req POST "$URL" -H "$(auth)" -H 'Content-Type: application/json' --data-binary '{"message":{"role":"user","name":"human_1","content":"a person speaks"}}'
check "role user is accepted" jqb '.seq == 4 and .message.role == "user"'

post_msg '{"message":{"role":"system","name":"iris","content":"spoof"}}'
expect_error "role system is 400" 400 invalid_request
post_msg "$(msg 'bad name!' '"x"')"
expect_error "a name outside [A-Za-z0-9._-] is 400" 400 invalid_request
post_msg "$(msg "$(printf 'n%.0s' $(seq 65))" '"x"')"
expect_error "a 65-character name is 400" 400 invalid_request
post_msg "$(msg "$(printf 'n%.0s' $(seq 64))" '"x"')"
check "a 64-character name is accepted" is "$STATUS" 201
post_msg "$(msg alpha '""')"
expect_error "empty content is 400" 400 invalid_request
post_msg '{"message":'
expect_error "broken JSON is 400" 400 invalid_request
post_msg '{"metadata":{}}'
expect_error "a missing message is 400" 400 invalid_request
post_msg "$(msg alpha '"x"' '[1]')"
expect_error "metadata that is not an object is 400" 400 invalid_request

# Body cap: exactly max_body_bytes is accepted, one byte more is 413.
pad_body() {  # TOTAL-BYTES
  local frame; frame="$(msg alpha '""')"
  local n=$(( $1 - ${#frame} ))
  printf '{"message":{"role":"assistant","name":"alpha","content":"%s"}}' "$(head -c "$n" /dev/zero | tr '\0' 'a')" > "$TMP/big"
}
pad_body "$MAX_BODY"
check "the padded body is exactly max_body_bytes" is "$(wc -c < "$TMP/big" | tr -d ' ')" "$MAX_BODY"
req POST "$URL" -H "$(auth)" -H 'Content-Type: application/json' --data-binary @"$TMP/big"
check "a body of exactly max_body_bytes is 201" is "$STATUS" 201
pad_body $((MAX_BODY + 1))
req POST "$URL" -H "$(auth)" -H 'Content-Type: application/json' --data-binary @"$TMP/big"
expect_error "one byte over max_body_bytes is 413" 413 payload_too_large

# -- reading ---------------------------------------------------------------------------------
req GET "$URL" -H "$(auth)"
HEAD="$(jq -r .last_seq "$TMP/body")"
check "read returns every message in order, seq contiguous from 1" jqb '[.messages[].seq] == [range(1; .last_seq + 1)]'
req GET "$URL?since=2" -H "$(auth)"
check "since=2 returns seq > 2 only" jqb '(.messages|length) > 0 and all(.messages[]; .seq > 2)'
req GET "$URL?since=0&limit=1" -H "$(auth)"
check "limit=1 returns one message and the head as last_seq" jqb --argjson h "$HEAD" '(.messages|length) == 1 and .messages[0].seq == 1 and .last_seq == $h'
req GET "$URL?since=abc" -H "$(auth)"
expect_error "a non-numeric since is 400" 400 invalid_request

# -- long-poll -------------------------------------------------------------------------------
req GET "$URL/wait?since=0&timeout=5" -H "$(auth)"
check "wait with messages already past since returns at once" jqb '.messages[0].seq == 1'
req GET "$URL/wait?since=$HEAD&timeout=0" -H "$(auth)"
check "timeout=0 is an instant poll (204 when nothing is new)" is "$STATUS" 204
req GET "$URL/wait?since=0&timeout=0&filter=urgent" -H "$(auth)"
check "filter=urgent returns only urgent messages, last_seq the head" jqb --argjson h "$HEAD" '(.messages|length) == 1 and .messages[0].seq == 2 and .last_seq == $h'
req GET "$URL/wait?since=0&timeout=0&filter=everything" -H "$(auth)"
expect_error "an unknown filter is 400" 400 invalid_request
req GET "$URL/wait?since=0&timeout=-1" -H "$(auth)"
expect_error "a negative timeout is 400" 400 invalid_request

curl -s -o "$TMP/waited" -w '%{http_code}' "$URL/wait?since=$HEAD&timeout=$MAX_WAIT" -H "$(auth)" > "$TMP/wait_status" &
WAITER=$!
sleep 0.5
post_msg "$(msg alpha '"wake up"')"
NEW="$(jq -r .seq "$TMP/body")"
wait "$WAITER"
check "a parked wait returns the appended message" jq -e --argjson n "$NEW" '.messages[0].seq == $n and .messages[0].message.content == "wake up"' "$TMP/waited"
check "the woken wait is 200" is "$(cat "$TMP/wait_status")" 200

curl -s -o "$TMP/urgent" -w '%{http_code}' "$URL/wait?since=$NEW&timeout=$MAX_WAIT&filter=urgent" -H "$(auth)" > "$TMP/urgent_status" &
WAITER=$!
sleep 0.5
post_msg "$(msg alpha '"not urgent"')"
post_msg "$(msg alpha '"now urgent"' '{"urgent":true}')"
URGENT="$(jq -r .seq "$TMP/body")"
wait "$WAITER"
check "a filtered wait skips plain messages and wakes on the urgent one" jq -e --argjson u "$URGENT" '(.messages|length) == 1 and .messages[0].seq == $u and .last_seq >= $u' "$TMP/urgent"

# -- files -----------------------------------------------------------------------------------
printf 'trace line 1\ntrace line 2\n' > "$TMP/trace.log"
req PUT "$URL/files/trace.log" -H "$(auth)" -H 'Content-Type: text/plain' --data-binary @"$TMP/trace.log"
check "PUT file is 201" is "$STATUS" 201
check "the upload is announced as file_uploaded by the relay" jqb '.message.role == "system" and .message.name == "iris" and .metadata.event == "file_uploaded" and .metadata.file.name == "trace.log" and .metadata.file.size == 26 and .metadata.file.content_type == "text/plain"'
FILE_SEQ="$(jq -r .seq "$TMP/body")"
req GET "$URL/files" -H "$(auth)"
check "the file list names the file with the announcement's seq" jqb --argjson s "$FILE_SEQ" '.files | length == 1 and .[0].name == "trace.log" and .[0].size == 26 and .[0].content_type == "text/plain" and .[0].seq == $s and (.[0].uploaded_at|test("Z$"))'
req GET "$URL/files/trace.log" -H "$(auth)"
check "GET file returns the bytes" cmp -s "$TMP/body" "$TMP/trace.log"
check "GET file has the stored Content-Type" grep -qi '^content-type: text/plain' "$TMP/headers"
req PUT "$URL/files/trace.log" -H "$(auth)" -H 'Content-Type: application/x-ndjson' --data-binary '{"v":2}'
check "the same name again overwrites and announces afresh" jqb --argjson s "$FILE_SEQ" '.seq > $s and .metadata.event == "file_uploaded" and .metadata.file.size == 7'
req GET "$URL/files" -H "$(auth)"
check "after an overwrite the list still has one entry, with the new seq" jqb '.files | length == 1 and .[0].size == 7 and .[0].content_type == "application/x-ndjson"'
req GET "$URL/files/missing.txt" -H "$(auth)"
expect_error "a missing file is 404" 404 not_found
req GET "$URL/files" -H "Authorization: Bearer nope-nope-nope"
expect_error "files need the key" 401 unauthorized

# -- terminate -------------------------------------------------------------------------------
req POST "$URL/terminate" -H "$(auth)"
check "terminate is 200 read-only with purge_at" jqb '.status == "read-only" and (.purge_at|test("Z$"))'
PURGE_AT="$(jq -r .purge_at "$TMP/body")"
req POST "$URL/terminate" -H "$(auth)"
check "terminate is idempotent" jqb --arg p "$PURGE_AT" '.status == "read-only" and .purge_at == $p'
req GET "$URL" -H "$(auth)"
check "session_terminated was appended once" jqb '[.messages[] | select(.metadata.event == "session_terminated")] | length == 1 and (.[0].message.role == "system")'
post_msg "$(msg alpha '"too late"')"
expect_error "writes after terminate are 409 session_read_only" 409 session_read_only
req PUT "$URL/files/late.txt" -H "$(auth)" --data-binary 'x'
expect_error "uploads after terminate are 409 session_read_only" 409 session_read_only
req GET "$URL/files/trace.log" -H "$(auth)"
check "reads still work after terminate" is "$STATUS" 200

# -- rate limit ------------------------------------------------------------------------------
if [ "$PER_MINUTE" -le 200 ]; then
  req POST "$BASE/sessions"
  URL="$(jq -r .url "$TMP/body")"; KEY="$(jq -r .key "$TMP/body")"
  for _ in $(seq "$PER_MINUTE"); do post_msg "$(msg alpha '"burst"')"; [ "$STATUS" = 201 ] || break; done
  check "messages_per_minute writes in a burst are accepted" is "$STATUS" 201
  post_msg "$(msg alpha '"one too many"')"
  expect_error "one more is 429 rate_limited" 429 rate_limited
  check "a 429 carries Retry-After" grep -qiE '^retry-after: [0-9]+' "$TMP/headers"
  req PUT "$URL/files/f.txt" -H "$(auth)" --data-binary 'x'
  expect_error "uploads draw from the same bucket" 429 rate_limited
  req POST "$URL/terminate" -H "$(auth)" >/dev/null
fi

# -- the rest --------------------------------------------------------------------------------
req GET "$BASE/nowhere"
expect_error "unknown paths use the error shape" 404 not_found

echo "$PASS passed, $FAIL failed"
[ "$FAIL" -eq 0 ]
