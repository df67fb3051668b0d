// The Lua scripts of the Redis backend. Each backend method is one script, so each runs atomically on
// the server: two replicas claiming the same run at the same moment are serialized by Redis itself.
//
// One hash per run (key `<prefix>run:<runId>`). Fields:
//   st state, ag/sk/si/pr/tc scope, snap snapshot bytes, out/tel/hs JSON parts (hs absent for none),
//   ca/ua/ex created/updated/expires (epoch ms), by bytes, rc resume count, tok claim token,
//   lu lease until, cr claiming replica, ret tombstone retention ms, pa purge at, mac record HMAC,
//   and per pending call: c:<id> call JSON, o:<id> owning replica, r:<id> outcome JSON,
//   a:<id> settled at, m:<id> outcome HMAC.
// Two sorted sets: `<prefix>live` (runId by expiresAt) and `<prefix>tombs` (runId by purgeAt).
//
// Replicas: `<prefix>replica:<id>` is a replica's lease (its last renewal, or "closed"), with a Redis
// expiry; `<prefix>replicas` holds every replica by its last renewal (Redis server time), and
// `<prefix>missing:<id>` the server time a replica's lease was first found missing. That mark lives in
// Redis, not in one wait, so the grace period a missing lease gets is counted once for the whole
// deployment, whichever replica looks and however often.

const HELPERS = `
local function tombstone(key, live, tombs, runId, state, purgeAt)
  local fields = redis.call('HKEYS', key)
  local drop = {}
  for _, field in ipairs(fields) do
    if field ~= 'ag' and field ~= 'sk' and field ~= 'si' and field ~= 'pr' and field ~= 'tc'
      and field ~= 'ret' and field ~= 'ca' then
      drop[#drop + 1] = field
    end
  end
  for index = 1, #drop, 500 do
    redis.call('HDEL', key, unpack(drop, index, math.min(index + 499, #drop)))
  end
  redis.call('HSET', key, 'st', state, 'pa', purgeAt, 'by', 0)
  local ret = tonumber(redis.call('HGET', key, 'ret') or '3600000')
  -- Redis forgets the tombstone on its own, a minute after the store would purge it.
  redis.call('PEXPIRE', key, ret + 60000)
  redis.call('ZREM', live, runId)
  redis.call('ZADD', tombs, purgeAt, runId)
end

local function claimed(key, token)
  local head = redis.call('HMGET', key, 'st', 'tok')
  if not head[1] then return 'gone' end
  if head[1] ~= 'running' or head[2] ~= token then return head[1] end
  return nil
end

local function isCallField(field)
  local prefix = string.sub(field, 1, 2)
  return prefix == 'c:' or prefix == 'o:' or prefix == 'r:' or prefix == 'a:' or prefix == 'm:'
end
`;

/**
 * Server time and the state of a replica's lease. A lease that is missing (expired, or lost by a Redis
 * restart) is marked with the time it was first found missing; it counts as gone once it has stayed
 * missing for one more lease period, because a live replica renews every third of a lease and at once
 * when its connection comes back, clearing the mark. A lease its replica marked "closed" is gone at once.
 */
const OWNER = `
if redis.replicate_commands then redis.replicate_commands() end
local function serverNow()
  local time = redis.call('TIME')
  return tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
end

-- {'gone', 0}, or {'alive' | 'missing', ms until it is worth looking again}.
local function ownerState(prefix, id, leaseMs, markMs)
  local lease = prefix .. 'replica:' .. id
  local value = redis.call('GET', lease)
  if value == 'closed' then return {'gone', 0} end
  if value then return {'alive', math.max(redis.call('PTTL', lease), 0)} end
  local mark = prefix .. 'missing:' .. id
  local now = serverNow()
  local since = redis.call('GET', mark)
  if not since then
    redis.call('SET', mark, now, 'PX', markMs)
    return {'missing', leaseMs}
  end
  local age = now - tonumber(since)
  if age >= leaseMs then return {'gone', 0} end
  return {'missing', leaseMs - age}
end
`;

/** ARGV: prefix, replicaId, leaseMs, markMs. Answers {state, ms} (see ownerState). */
export const OWNER_STATE = `${OWNER}
return ownerState(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]))
`;

/**
 * ARGV: prefix, replicaId, leaseMs, markMs. Renews this replica's lease and clears its missing mark,
 * then marks every other replica that stopped renewing as missing (once), so the grace period of a dead
 * replica starts when its lease runs out, not when a wait first looks. Answers the live replica count.
 */
export const RENEW = `${OWNER}
local prefix, id, leaseMs, markMs = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local now = serverNow()
local registry = prefix .. 'replicas'
redis.call('SET', prefix .. 'replica:' .. id, now, 'PX', leaseMs)
redis.call('DEL', prefix .. 'missing:' .. id)
redis.call('ZADD', registry, now, id)
for _, other in ipairs(redis.call('ZRANGEBYSCORE', registry, '-inf', now - leaseMs, 'LIMIT', 0, 100)) do
  local value = redis.call('GET', prefix .. 'replica:' .. other)
  if not value then
    redis.call('SET', prefix .. 'missing:' .. other, now, 'PX', markMs, 'NX')
    redis.call('ZREM', registry, other)
  elseif value == 'closed' then
    redis.call('ZREM', registry, other)
  end
end
return redis.call('ZCOUNT', registry, now - leaseMs, '+inf')
`;

/** ARGV: prefix, replicaId, markMs. A replica that stops: its calls are gone at once. */
export const CLOSE = `
redis.call('SET', ARGV[1] .. 'replica:' .. ARGV[2], 'closed', 'PX', tonumber(ARGV[3]))
redis.call('ZREM', ARGV[1] .. 'replicas', ARGV[2])
return 1
`;

/**
 * KEYS: run, live. ARGV: maxLive per replica, expiresAt, keyTtlMs, runId, prefix, leaseMs, maxLive per
 * principal per replica, agentId, sessionKey, then field/value pairs. Both caps are per replica: the
 * deployment holds that many times its live replicas. The principal's live runs are counted from the
 * live set (at most the deployment's cap), so no counter can drift from the runs themselves. Answers
 * {'full', limit, own, cap, principalCap} where own is the principal's count, never the total.
 */
export const INSERT = `${OWNER}
if redis.call('EXISTS', KEYS[1]) == 1 then return {'taken'} end
local replicas = math.max(redis.call('ZCOUNT', ARGV[5] .. 'replicas', serverNow() - tonumber(ARGV[6]), '+inf'), 1)
local cap = tonumber(ARGV[1]) * replicas
local principalCap = tonumber(ARGV[7]) * replicas
local runs = redis.call('ZRANGE', KEYS[2], 0, -1)
local own = 0
for _, runId in ipairs(runs) do
  local head = redis.call('HMGET', ARGV[5] .. 'run:' .. runId, 'ag', 'sk')
  if head[1] == ARGV[8] and head[2] == ARGV[9] then own = own + 1 end
end
if #runs >= cap then return {'full', 'store', own, cap, principalCap} end
if own >= principalCap then return {'full', 'principal', own, cap, principalCap} end
redis.call('HSET', KEYS[1], unpack(ARGV, 10))
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[4])
return {'ok'}
`;

/** KEYS: run. ARGV: callId, outcomeJson, outcomeBytes, settledAt, maxBytes, mac, channel. */
export const SETTLE = `
local state = redis.call('HGET', KEYS[1], 'st')
if state ~= 'waiting' and state ~= 'running' then return {'run_gone'} end
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[1], 'c:' .. id) == 0 then return {'unknown_call'} end
if redis.call('HEXISTS', KEYS[1], 'r:' .. id) == 1 then return {'already_settled'} end
local bytes = tonumber(redis.call('HGET', KEYS[1], 'by'))
if bytes + tonumber(ARGV[3]) > tonumber(ARGV[5]) then return {'too_large', bytes} end
redis.call('HSET', KEYS[1], 'r:' .. id, ARGV[2], 'a:' .. id, ARGV[4], 'm:' .. id, ARGV[6],
  'by', string.format('%d', bytes + tonumber(ARGV[3])))
redis.call('PUBLISH', ARGV[7], id)
return {'recorded'}
`;

/**
 * KEYS: run, live, tombs, epoch. ARGV: agentId, sessionKey, sessionId, parentRunId, now, claimToken,
 * leaseUntil, purgeAt, runId, epoch, replicaId, prefix, leaseMs, markMs. A claim held by a replica
 * that is gone (see ownerState) is taken over before its claim lease runs out.
 */
export const CLAIM = `${HELPERS}${OWNER}
-- A run that is not there, and one of another caller, get the same answer: after Redis lost its data,
-- "reset" or "lost" (a run missing now may have been stored before that), otherwise "unknown".
local function missing(answer)
  if redis.call('GET', KEYS[4]) ~= ARGV[10] then return {'reset'} end
  local lostAt = redis.call('GET', KEYS[4] .. '-lost-at')
  if lostAt then return {'lost', lostAt} end
  return {answer}
end
if redis.call('EXISTS', KEYS[1]) == 0 then return missing('unknown') end
local head = redis.call('HMGET', KEYS[1], 'ag', 'sk', 'si', 'pr', 'st', 'lu', 'ex', 'by')
if head[1] ~= ARGV[1] or head[2] ~= ARGV[2] or head[3] ~= ARGV[3] or head[4] ~= ARGV[4] then
  return missing('scope_mismatch')
end
local state = head[5]
local now = tonumber(ARGV[5])
if state == 'aborted' then return {'aborted'} end
if state == 'expired' then return {'expired', 0, 0} end
if state == 'completed' or state == 'failed' then return {'finished', state} end
if state == 'running' and tonumber(head[6]) > now then
  local claimer = redis.call('HGET', KEYS[1], 'cr')
  if not claimer or ownerState(ARGV[12], claimer, tonumber(ARGV[13]), tonumber(ARGV[14]))[1] ~= 'gone' then
    return {'busy'}
  end
end
if tonumber(head[7]) <= now then
  tombstone(KEYS[1], KEYS[2], KEYS[3], ARGV[9], 'expired', ARGV[8])
  return {'expired', tonumber(head[8]), 1}
end
redis.call('HSET', KEYS[1], 'st', 'running', 'tok', ARGV[6], 'lu', ARGV[7], 'cr', ARGV[11])
redis.call('HINCRBY', KEYS[1], 'rc', 1)
return {'claimed', redis.call('HGETALL', KEYS[1])}
`;

/**
 * KEYS: run, live. ARGV: claimToken, runId, expiresAt, keyTtlMs, baseBytes, maxBytes, replicaId,
 * hasHostState ('1' or '0'), callCount, then per call (callId, callJson, outcomeJson or '', settledAt,
 * outcomeMac), then field/value pairs of the parts.
 */
export const REPLACE = `${HELPERS}
local lost = claimed(KEYS[1], ARGV[1])
if lost then return {'lost', lost} end
local count = tonumber(ARGV[9])
local bytes = tonumber(ARGV[5])
local calls = {}
for index = 0, count - 1 do
  local base = 10 + index * 5
  local id = ARGV[base]
  local call = { id = id, json = ARGV[base + 1], outcome = ARGV[base + 2], at = ARGV[base + 3], mac = ARGV[base + 4] }
  local old = redis.call('HMGET', KEYS[1], 'o:' .. id, 'r:' .. id, 'a:' .. id, 'm:' .. id)
  call.owner = old[1] or ARGV[7]
  if call.outcome == '' and old[2] then
    call.outcome = old[2]
    call.at = old[3]
    call.mac = old[4]
    bytes = bytes + string.len(old[2])
  end
  calls[#calls + 1] = call
end
if bytes > tonumber(ARGV[6]) then return {'too_large', bytes} end
local drop = {}
for _, field in ipairs(redis.call('HKEYS', KEYS[1])) do
  if isCallField(field) then drop[#drop + 1] = field end
end
if ARGV[8] == '0' then drop[#drop + 1] = 'hs' end
drop[#drop + 1] = 'tok'
for index = 1, #drop, 500 do
  redis.call('HDEL', KEYS[1], unpack(drop, index, math.min(index + 499, #drop)))
end
for _, call in ipairs(calls) do
  redis.call('HSET', KEYS[1], 'c:' .. call.id, call.json, 'o:' .. call.id, call.owner)
  if call.outcome ~= '' then
    redis.call('HSET', KEYS[1], 'r:' .. call.id, call.outcome, 'a:' .. call.id, call.at, 'm:' .. call.id, call.mac)
  end
end
redis.call('HSET', KEYS[1], unpack(ARGV, 10 + count * 5))
redis.call('HSET', KEYS[1], 'st', 'waiting', 'lu', 0, 'by', string.format('%d', bytes))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[2])
return {'ok', bytes}
`;

/** KEYS: run. ARGV: claimToken. */
export const RELEASE = `${HELPERS}
local lost = claimed(KEYS[1], ARGV[1])
if lost then return {'lost', lost} end
redis.call('HSET', KEYS[1], 'st', 'waiting', 'lu', 0)
redis.call('HDEL', KEYS[1], 'tok')
return {'ok'}
`;

/** KEYS: run, live, tombs. ARGV: claimToken, state, purgeAt, runId. */
export const FINISH = `${HELPERS}
local lost = claimed(KEYS[1], ARGV[1])
if lost then return {'lost', lost} end
local bytes = tonumber(redis.call('HGET', KEYS[1], 'by'))
tombstone(KEYS[1], KEYS[2], KEYS[3], ARGV[4], ARGV[2], ARGV[3])
return {'ok', bytes}
`;

/**
 * KEYS: live, tombs. ARGV: purgeAt, key prefix, runId or '', then pairs of (scope field, value).
 * Live runs are capped (maxLiveRuns), so a scan of them is cheaper than an index per field.
 */
export const ABORT = `${HELPERS}
local dropped = {}
local candidates
if ARGV[3] ~= '' then candidates = { ARGV[3] } else candidates = redis.call('ZRANGE', KEYS[1], 0, -1) end
for _, runId in ipairs(candidates) do
  local key = ARGV[2] .. 'run:' .. runId
  local state = redis.call('HGET', key, 'st')
  if not state then
    redis.call('ZREM', KEYS[1], runId)
  elseif state == 'waiting' or state == 'running' then
    local match = true
    for index = 4, #ARGV, 2 do
      if redis.call('HGET', key, ARGV[index]) ~= ARGV[index + 1] then match = false end
    end
    if match then
      dropped[#dropped + 1] = runId
      dropped[#dropped + 1] = tonumber(redis.call('HGET', key, 'by'))
      tombstone(key, KEYS[1], KEYS[2], runId, 'aborted', ARGV[1])
    end
  end
end
return dropped
`;

/**
 * KEYS: live, tombs. ARGV: now, purgeAt, key prefix, batch size, skip. Expires up to one batch of live
 * runs past their TTL (not those under a valid claim, which are skipped) and answers
 * {scanned, skipped, runId, bytes, runId, bytes, ...}.
 */
export const SWEEP_EXPIRE = `${HELPERS}
local now = tonumber(ARGV[1])
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', tonumber(ARGV[5]), tonumber(ARGV[4]))
local answer = { #due, 0 }
for _, runId in ipairs(due) do
  local key = ARGV[3] .. 'run:' .. runId
  local head = redis.call('HMGET', key, 'st', 'lu', 'by')
  if not head[1] then
    redis.call('ZREM', KEYS[1], runId)
  elseif head[1] == 'running' and tonumber(head[2]) > now then
    answer[2] = answer[2] + 1
  else
    answer[#answer + 1] = runId
    answer[#answer + 1] = tonumber(head[3])
    tombstone(key, KEYS[1], KEYS[2], runId, 'expired', ARGV[2])
  end
end
return answer
`;

/** KEYS: tombs. ARGV: now, key prefix, batch size. Answers how many tombstones it removed. */
export const SWEEP_PURGE = `
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', tonumber(ARGV[1]), 'LIMIT', 0, tonumber(ARGV[3]))
for _, runId in ipairs(due) do
  redis.call('DEL', ARGV[2] .. 'run:' .. runId)
  redis.call('ZREM', KEYS[1], runId)
end
return #due
`;

/** KEYS: live, tombs. ARGV: key prefix. Answers {live, running, tombstones, liveBytes}. */
export const STATS = `
local live, running, bytes = 0, 0, 0
for _, runId in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  local head = redis.call('HMGET', ARGV[1] .. 'run:' .. runId, 'st', 'by')
  if head[1] == 'waiting' or head[1] == 'running' then
    live = live + 1
    bytes = bytes + tonumber(head[2])
    if head[1] == 'running' then running = running + 1 end
  end
end
return {live, running, redis.call('ZCARD', KEYS[2]), bytes}
`;

// A host-record lease: taken when the key is absent (Redis dropped an expired one), renewed when the
// caller holds it. KEYS[1] the record; ARGV holder, expiresAt (epoch ms).
export const LEASE_HOST = `
local current = redis.call('GET', KEYS[1])
if current and current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PXAT', ARGV[2])
return 1
`;

// Ends a host-record lease only for its holder. KEYS[1] the record; ARGV holder.
export const RELEASE_HOST = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`;

// Host records under quota. Beside each record (`<prefix>host:<key>`, a string with a Redis expiry):
//   KEYS[2] `<prefix>hostq:meta` hash key -> "<evictable 0/1>|<bytes>|<owner>",
//   KEYS[3] `<prefix>hostq:order` zset key by write order (oldest first),
//   KEYS[4] `<prefix>hostq:expiry` zset key by expiresAt (what Redis expired is dropped from the index),
//   KEYS[5] `<prefix>hostq:total` bytes of every record, ARGV[.] owner zsets `<prefix>hostq:owner:<owner>`.
const HOST_QUOTA_HELPERS = `
local meta, order, expiry, total = KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local function parse(text)
  local evictable, bytes, owner = string.match(text, '^(%d)|(%d+)|(.*)$')
  return evictable == '1', tonumber(bytes), owner
end
local function drop(member, recordPrefix, ownerPrefix)
  local text = redis.call('HGET', meta, member)
  if text then
    local _, bytes, owner = parse(text)
    redis.call('DECRBY', total, bytes)
    redis.call('ZREM', ownerPrefix .. owner, member)
    redis.call('HDEL', meta, member)
  end
  redis.call('ZREM', order, member)
  redis.call('ZREM', expiry, member)
  return redis.call('DEL', recordPrefix .. member)
end
`;

// Puts a host record under its owner's quota and the store's budget, evicting finished records to make
// room (the owner's own oldest first, then anyone's oldest first), or refusing without a change.
// KEYS[1] the record; KEYS[2..5] above. ARGV: member, sealed value, expiresAt, owner, bytes, evictable,
// maxRecordsPerOwner, maxBytesPerOwner, maxBytes, now, record key prefix, owner zset prefix.
export const PUT_HOST = `${HOST_QUOTA_HELPERS}
local member, value, expiresAt, owner = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local bytes, evictableArg = tonumber(ARGV[5]), ARGV[6]
local maxCount, maxOwnBytes, maxBytes = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local now, recordPrefix, ownerPrefix = tonumber(ARGV[10]), ARGV[11], ARGV[12]
local ownKey = ownerPrefix .. owner
for _, gone in ipairs(redis.call('ZRANGEBYSCORE', expiry, '-inf', now, 'LIMIT', 0, 1000)) do
  drop(gone, recordPrefix, ownerPrefix)
end
local ownCount, ownBytes = 0, 0
local own = {}
for _, other in ipairs(redis.call('ZRANGE', ownKey, 0, -1)) do
  if other ~= member then
    local text = redis.call('HGET', meta, other)
    if text then
      local evictable, size = parse(text)
      ownCount = ownCount + 1
      ownBytes = ownBytes + size
      if evictable then own[#own + 1] = { other, size } end
    end
  end
end
local totalBytes = tonumber(redis.call('GET', total) or '0')
local replaced = redis.call('HGET', meta, member)
if replaced then
  local _, size = parse(replaced)
  totalBytes = totalBytes - size
end
local usedCount, usedBytes = ownCount, ownBytes
if bytes > maxOwnBytes then return { 0, 'owner', usedCount, usedBytes } end
if bytes > maxBytes then return { 0, 'store', usedCount, usedBytes } end
local chosen, evict = {}, {}
local function ownOver() return ownCount + 1 > maxCount or ownBytes + bytes > maxOwnBytes end
local index = 1
while ownOver() and index <= #own do
  local entry = own[index]
  chosen[entry[1]] = true
  evict[#evict + 1] = entry[1]
  ownCount, ownBytes, totalBytes = ownCount - 1, ownBytes - entry[2], totalBytes - entry[2]
  index = index + 1
end
if ownOver() then return { 0, 'owner', usedCount, usedBytes } end
local start = 0
while totalBytes + bytes > maxBytes do
  local batch = redis.call('ZRANGE', order, start, start + 99)
  if #batch == 0 then break end
  for _, other in ipairs(batch) do
    if totalBytes + bytes <= maxBytes then break end
    if other ~= member and not chosen[other] then
      local text = redis.call('HGET', meta, other)
      if text then
        local evictable, size = parse(text)
        if evictable then
          chosen[other] = true
          evict[#evict + 1] = other
          totalBytes = totalBytes - size
        end
      end
    end
  end
  start = start + 100
end
if totalBytes + bytes > maxBytes then return { 0, 'store', usedCount, usedBytes } end
for _, other in ipairs(evict) do drop(other, recordPrefix, ownerPrefix) end
drop(member, recordPrefix, ownerPrefix)
redis.call('SET', KEYS[1], value, 'PXAT', expiresAt)
local seq = redis.call('INCR', order .. ':seq')
redis.call('HSET', meta, member, evictableArg .. '|' .. bytes .. '|' .. owner)
redis.call('ZADD', order, seq, member)
redis.call('ZADD', expiry, expiresAt, member)
redis.call('ZADD', ownKey, seq, member)
redis.call('INCRBY', total, bytes)
return { 1, #evict }
`;

// Deletes a host record and its place in the quota index. KEYS as PUT_HOST; ARGV member, record key
// prefix, owner zset prefix. Answers 1 when the record was there.
export const DELETE_HOST = `${HOST_QUOTA_HELPERS}
return drop(ARGV[1], ARGV[2], ARGV[3])
`;
