/**
 * Every Lua script of the gateway, in one place: the Redis store's (redis-store.ts), the
 * coordinator's leases (redis-coordinator.ts) and the rate limiter's sync
 * (batched-rate-limit-store.ts). Each operation that must be atomic is one script, so a
 * session index or a replay log is never left over its bound or without a TTL between two
 * commands, and a replica never renews or releases a lease another one took over.
 *
 * Keys inside a script are built from the KEYS it was given (ioredis adds the key prefix to
 * KEYS only): a session key `…s:<user>:<session>` minus the session id is the prefix of the
 * user's other sessions, a log key `…e:<user>:<session>:<stream>` minus `<session>:<stream>`
 * the prefix of the user's other logs.
 */

/**
 * What the session scripts share: the clock and the use stamp. The user's session index
 * (`si:`) is ordered by last use, and `sessions.maxPerUser` evicts from its low end (SPEC §8
 * "Budgets", issue 28 §7). A stamp is Redis' own clock in microseconds — one clock for every
 * replica — or one more than the newest stamp when that is later, so that uses in the same
 * microsecond keep their order. Scores are written with `%.0f`: Lua would print a 16-digit
 * number with 14 significant digits. The in-use marks (`su:`) hold, per session, the stamp
 * until which a replica said it is in use (a client stream open, a call in flight).
 */
const SESSION_CLOCK = `
local function clock()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local function score(n) return string.format('%.0f', n) end
local function stamp(index, now)
  local top = redis.call('ZRANGE', index, -1, -1, 'WITHSCORES')
  local after = (tonumber(top[2]) or 0) + 1
  if after > now then return score(after) end
  return score(now)
end
local function keepFor(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end`;

/**
 * Creates a session and indexes it as just used, then, with a cap (ARGV[4] > 0), forgets
 * index entries whose session expired and deletes sessions beyond the cap (issue 13,
 * `sessions.maxPerUser`): first those not in use, least recently used first, then those in
 * use (issue 28 §7), never the one being created. The sessions a user abandons without a
 * DELETE (a client's probe, one per CLI command) go before the one they are using.
 * KEYS: session, index, in-use marks. ARGV: record, ttl ms, session id, cap.
 * Returns the evicted sessions as [id, record, id, record, …].
 */
export const CREATE_SESSION = `${SESSION_CLOCK}
local ttl = tonumber(ARGV[2])
local now = clock()
redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
redis.call('ZADD', KEYS[2], stamp(KEYS[2], now), ARGV[3])
keepFor(KEYS[2], ttl)
local cap = tonumber(ARGV[4])
local evicted = {}
if cap < 1 or redis.call('ZCARD', KEYS[2]) <= cap then return evicted end
local prefix = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[3])
local ids = redis.call('ZRANGE', KEYS[2], 0, -1)
local live = #ids
for _, id in ipairs(ids) do
  if redis.call('EXISTS', prefix .. id) == 0 then
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    live = live - 1
  end
end
for pass = 1, 2 do
  for _, id in ipairs(ids) do
    if live <= cap then return evicted end
    local inUse = (tonumber(redis.call('ZSCORE', KEYS[3], id)) or 0) > now
    if id ~= ARGV[3] and (pass == 2 or not inUse) then
      local record = redis.call('GET', prefix .. id)
      if record then
        redis.call('DEL', prefix .. id)
        redis.call('ZREM', KEYS[2], id)
        redis.call('ZREM', KEYS[3], id)
        evicted[#evicted + 1] = id
        evicted[#evicted + 1] = record
        live = live - 1
      end
    end
  end
end
return evicted`;

/**
 * Reads a session, slides its idle TTL and records the use; the user's index lives at least
 * as long as any of their sessions. The use rides on the read every message already makes
 * (SPEC §5: one round trip per message). KEYS: session, index. ARGV: ttl ms, session id.
 */
export const TOUCH_SESSION = `${SESSION_CLOCK}
local record = redis.call('GETEX', KEYS[1], 'PX', ARGV[1])
if not record then return record end
redis.call('ZADD', KEYS[2], stamp(KEYS[2], clock()), ARGV[2])
keepFor(KEYS[2], tonumber(ARGV[1]))
return record`;

/**
 * Marks live sessions of one user in use until ARGV[1] ms from now, records a use of each,
 * and drops marks that lapsed. KEYS: index, in-use marks. ARGV: lease ms, session ids….
 */
export const MARK_SESSIONS_IN_USE = `${SESSION_CLOCK}
local now = clock()
local lease = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', score(now))
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
    redis.call('ZADD', KEYS[1], stamp(KEYS[1], now), ARGV[i])
    redis.call('ZADD', KEYS[2], 'GT', score(now + lease * 1000), ARGV[i])
  end
end
keepFor(KEYS[2], lease)
return 0`;

/** Ends a session's in-use mark and records a use. KEYS: index, in-use marks. ARGV: session id. */
export const RELEASE_SESSION_IN_USE = `${SESSION_CLOCK}
redis.call('ZREM', KEYS[2], ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[1]) then redis.call('ZADD', KEYS[1], stamp(KEYS[1], clock()), ARGV[1]) end
return 0`;

/** KEYS: session, index, in-use marks. ARGV: session id. Returns 1 when the session existed. */
export const DELETE_SESSION = `
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
return redis.call('DEL', KEYS[1])`;

export const DELETE_IF = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * Appends to the replay logs of several streams (append-batcher.ts), bounding each log and
 * each user's logs together (store.ts ReplayBudget), and publishes the new entries for a
 * replica that follows the stream from elsewhere (RedisCoordinator.watchStream).
 *
 * Per stream, KEYS: the log (a list), the user's log sizes (a hash: one field per stream,
 * `total` for all of them), the user's logs by last append (a sorted set);
 * ARGV: stream field (`<session>:<stream>`), max events, max bytes, max bytes per user,
 * ttl ms, channel, entry count, entries.
 *
 * A log's first entry is its meta entry (redis-store.ts writes it as `{"seq":…,"meta":…`);
 * trimming keeps it, and the newest entry, and drops the oldest of the rest. Over the user's
 * budget, the user's least recently appended other logs are deleted whole. A size recorded
 * for a log that has since expired is taken off the total when the log starts again.
 *
 * An append that already ran is not run again: when a log's newest entry is already the
 * newest entry of the append, that append landed before (a call sent again after its answer
 * was lost: store-waits.ts) and nothing is pushed, counted or published for it. Entries carry
 * the stream's sequence number, and a relay sends its next append only after the previous
 * one answered (stream-relay.ts), so a new append never ends with the log's newest entry.
 *
 * In one call all KEYS must share a hash slot in a cluster (redis-keys.ts: a user's keys
 * share a tag; the store groups its calls by slot). `publish` is PUBLISH, or SPUBLISH in a
 * cluster (sharded pub/sub: the message stays on the shard that owns the stream's slot
 * instead of crossing the whole cluster bus; the channel shares the user's tag, so a script
 * may publish it). Standalone and sentinel keep PUBLISH, which every Redis version has.
 */
export const appendEventsScript = (publish: 'PUBLISH' | 'SPUBLISH'): string => `
local function isMeta(entry)
  return type(entry) == 'string' and string.find(entry, '^{"seq":%d+,"meta":') ~= nil
end

-- Drops the n oldest entries after the meta entry; returns their bytes.
local function drop(log, pinned, n)
  local meta = nil
  if pinned then meta = redis.call('LPOP', log) end
  local gone = redis.call('LPOP', log, n)
  if meta then redis.call('LPUSH', log, meta) end
  local bytes = 0
  for _, e in ipairs(gone) do bytes = bytes + #e end
  return bytes
end

local a = 1
for k = 1, #KEYS, 3 do
  local log, sizes, order = KEYS[k], KEYS[k + 1], KEYS[k + 2]
  local field = ARGV[a]
  local maxEvents, maxBytes, maxUserBytes = tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
  local ttl, channel = ARGV[a + 4], ARGV[a + 5]
  local first = a + 7
  local last = a + 6 + tonumber(ARGV[a + 6])
  -- Not the newest entry already: this append has not run yet.
  if redis.call('LINDEX', log, -1) ~= ARGV[last] then
    local length = redis.call('LLEN', log)
    local known = tonumber(redis.call('HGET', sizes, field)) or 0
    local bytes = known
    if length == 0 then bytes = 0 end
    -- unpack() is limited to a few thousand values: push in slices.
    for i = first, last, 1000 do
      redis.call('RPUSH', log, unpack(ARGV, i, math.min(i + 999, last)))
    end
    for i = first, last do bytes = bytes + #ARGV[i] end
    length = length + last - first + 1
    if length > maxEvents or bytes > maxBytes then
      local pinned = isMeta(redis.call('LINDEX', log, 0))
      local data = length
      if pinned then data = length - 1 end
      if data > maxEvents then
        bytes = bytes - drop(log, pinned, data - maxEvents)
        data = maxEvents
      end
      while bytes > maxBytes and data > 1 do
        bytes = bytes - drop(log, pinned, 1)
        data = data - 1
      end
    end
    redis.call('HSET', sizes, field, bytes)
    local total = redis.call('HINCRBY', sizes, 'total', bytes - known)
    local top = redis.call('ZRANGE', order, -1, -1, 'WITHSCORES')
    if top[1] ~= field then redis.call('ZADD', order, (tonumber(top[2]) or 0) + 1, field) end
    local prefix = string.sub(log, 1, #log - #field)
    while total > maxUserBytes do
      local oldest = redis.call('ZRANGE', order, 0, 0)[1]
      if not oldest or oldest == field then break end
      local size = tonumber(redis.call('HGET', sizes, oldest)) or 0
      redis.call('DEL', prefix .. oldest)
      redis.call('HDEL', sizes, oldest)
      redis.call('ZREM', order, oldest)
      total = redis.call('HINCRBY', sizes, 'total', -size)
    end
    redis.call('PEXPIRE', log, ttl)
    redis.call('PEXPIRE', sizes, ttl)
    redis.call('PEXPIRE', order, ttl)
    redis.call('${publish}', channel, '[' .. table.concat(ARGV, ',', first, last) .. ']')
  end
  a = last + 1
end
return #KEYS / 3`;

/**
 * Claims a session's standalone stream (coordinator CLAIM): an existing holder wins unless
 * ARGV[3] is '1' (force); a granted claim takes the session's mailbox with it.
 * KEYS: holder, mailbox (one user: one slot). ARGV: "<replica> <stream>", ttl ms, force.
 * Returns {granted 0|1, previous holder or '', mailbox messages…}.
 */
export const CLAIM_STANDALONE = `
local previous = redis.call('GET', KEYS[1])
if previous and ARGV[3] ~= '1' then return {0, previous} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
local mail = redis.call('LRANGE', KEYS[2], 0, -1)
redis.call('DEL', KEYS[2])
return {1, previous or '', unpack(mail)}`;

/** Renews a lease only while it still holds ARGV[1] (compare-and-set). KEYS: lease. ARGV: value, ttl ms. */
export const RENEW_IF_HELD = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
return 0`;

/**
 * {@link RENEW_IF_HELD} for many leases in one call (RedisCoordinator.renewStandalones).
 * KEYS: the leases. ARGV: each lease's value, then the ttl ms. Returns 1 or 0 per lease.
 */
export const RENEW_MANY_IF_HELD = `
local ttl = ARGV[#KEYS + 1]
local out = {}
for i, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[i] then out[i] = redis.call('PEXPIRE', key, ttl) else out[i] = 0 end
end
return out`;

/** Releases a lease only while it still holds ARGV[1] (compare-and-set). KEYS: lease. ARGV: value. */
export const RELEASE_IF_HELD = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0`;

/**
 * The rate limiter's sync (batched-rate-limit-store.ts; the bench tells its background calls
 * from the message path by it). KEYS: the counters. ARGV: per key, the increment then the
 * window (ms). Returns, per key, the counter after the increment and its remaining TTL (ms).
 * A key created here (its count equals the increment) gets the window as TTL; a key without
 * a TTL (never written by us that way) is repaired rather than left to live forever.
 */
export const RATE_LIMIT_FLUSH = `
local out = {}
for i, key in ipairs(KEYS) do
  local n = tonumber(ARGV[2 * i - 1])
  local window = tonumber(ARGV[2 * i])
  local count = redis.call('INCRBY', key, n)
  local ttl = window
  if count == n then
    redis.call('PEXPIRE', key, window)
  else
    ttl = redis.call('PTTL', key)
    if ttl < 0 then
      redis.call('PEXPIRE', key, window)
      ttl = window
    end
  end
  out[2 * i - 1] = count
  out[2 * i] = ttl
end
return out`;
