import { redisScript } from "../../redis/redis-script.js";

/*
 * Atomic steps, each one script, so that any number of replicas can share the
 * store. Each script touches only the keys it is given (KEYS): on a Redis
 * Cluster they all share the deployment's hash slot (the prefix is tagged). Records, idempotency keys and meta values are Keyv entries
 * (`<prefix>::task:<id>` holding `{"value": ..., "expires": ...}`); the
 * scripts read and write those same entries. The indexes are sorted sets:
 * `owner:<owner>` (an owner's tasks by creation), `owned:<status>:<owner>`
 * (the same, per status, for the task list), `unfinished` (tasks that must
 * have a place in the queue), `expiring` (`<id>|<owner>` by expiry time, what
 * the sweep takes out of the indexes) and `webhook-outbox` (finished tasks
 * whose webhook event is not queued yet, by the time they finished).
 */

/**
 * KEYS: task, owner index, unfinished index, idempotency key (with none, any key of the
 * deployment, untouched), sequence, owner's queued index.
 * ARGV: record, id, max per owner (0: none), idempotency entry ("" for none), its TTL, the task the key
 * made that the caller found expired ("" for none: it may be replaced).
 * Answers `seen` with the task the key made (the caller reads it; when it is gone, it calls
 * again naming it). Indexes are ordered by a sequence every replica shares, so tasks
 * created in one millisecond keep their order.
 */
export const CREATE = redisScript(`
if ARGV[4] ~= '' then
  local seen = redis.call('GET', KEYS[4])
  if seen then
    local entry = cjson.decode(seen).value
    if entry.taskId ~= ARGV[6] then return {'seen', entry.taskId, entry.fingerprint} end
  end
end
local limit = tonumber(ARGV[3])
if limit > 0 and redis.call('ZCARD', KEYS[2]) >= limit then return {'owner_full'} end
local seq = redis.call('INCR', KEYS[5])
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], seq, ARGV[2])
redis.call('ZADD', KEYS[6], seq, ARGV[2])
redis.call('ZADD', KEYS[3], seq, ARGV[2])
if ARGV[4] ~= '' then redis.call('SET', KEYS[4], ARGV[4], 'PX', ARGV[5]) end
return {'created'}
`);

/**
 * KEYS: task, unfinished index, expiring index, owner index, the owner's index of the old
 * status, of the new one, webhook outbox, expiring image keys.
 * ARGV: rev read, record, TTL or "", finished, expiring member, expiry time, id, into the
 * outbox, now, then the image store keys the finished record holds (they expire with it).
 * 1 written, 0 gone, -1 changed since read.
 */
export const TRANSITION = redisScript(`
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
if tostring(cjson.decode(raw).value.rev) ~= ARGV[1] then return -1 end
if ARGV[3] ~= '' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
if KEYS[5] ~= KEYS[6] then
  local seq = redis.call('ZSCORE', KEYS[4], ARGV[7])
  redis.call('ZREM', KEYS[5], ARGV[7])
  if seq then redis.call('ZADD', KEYS[6], seq, ARGV[7]) end
end
if ARGV[4] == '1' then
  redis.call('ZREM', KEYS[2], ARGV[7])
  if ARGV[3] ~= '' then
    redis.call('ZADD', KEYS[3], ARGV[6], ARGV[5])
    for i = 10, #ARGV do redis.call('ZADD', KEYS[8], ARGV[6], ARGV[i]) end
  end
  if ARGV[8] == '1' then redis.call('ZADD', KEYS[7], ARGV[9], ARGV[7]) end
end
return 1
`);

/**
 * KEYS: expiring index, webhook outbox, then per due task: its record, its owner's index and
 * the owner's four status indexes (queued, in_progress, completed, failed).
 * ARGV: the due members of the expiring index (`<id>|<owner>`), in the order of KEYS.
 * Takes each out of every index and deletes what is left of it; answers how many records
 * were deleted. Idempotent: a member already swept changes nothing.
 */
export const DROP_EXPIRED = redisScript(`
local deleted = 0
for i, member in ipairs(ARGV) do
  local at = 2 + (i - 1) * 6
  local id = string.sub(member, 1, string.find(member, '|', 1, true) - 1)
  for k = at + 2, at + 6 do redis.call('ZREM', KEYS[k], id) end
  redis.call('ZREM', KEYS[2], id)
  deleted = deleted + redis.call('DEL', KEYS[at + 1])
  redis.call('ZREM', KEYS[1], member)
end
return deleted
`);

/**
 * KEYS: owner index, the index to page (the owner's, or one of its status).
 * ARGV: the task the page follows or "", else the sequence it follows (an exclusive bound such
 * as `(12`) or "", count, "asc" for oldest first (else newest first).
 * The page's ids and sequences in that order; nil when that task is not the owner's.
 */
export const LIST = redisScript(`
local asc = ARGV[4] == 'asc'
local bound = ARGV[2]
if ARGV[1] ~= '' then
  local seq = redis.call('ZSCORE', KEYS[1], ARGV[1])
  if not seq then return false end
  bound = '(' .. seq
end
local count = tonumber(ARGV[3])
if asc then
  if bound == '' then bound = '-inf' end
  return redis.call('ZRANGEBYSCORE', KEYS[2], bound, '+inf', 'WITHSCORES', 'LIMIT', 0, count)
end
if bound == '' then bound = '+inf' end
return redis.call('ZREVRANGEBYSCORE', KEYS[2], bound, '-inf', 'WITHSCORES', 'LIMIT', 0, count)
`);

/**
 * KEYS: task, owner index, the owner's four status indexes (queued, in_progress, completed,
 * failed), unfinished index, expiring index, webhook outbox, expiring image keys.
 * ARGV: rev read, id, expiring member (`<id>|<owner>`), then the image store keys the record
 * holds. Deletes the record and takes the task out of every index (an idempotency key that
 * made it stays: read, it names a task that is gone). 1 deleted, 0 gone, -1 changed since read.
 */
export const DELETE = redisScript(`
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
if tostring(cjson.decode(raw).value.rev) ~= ARGV[1] then return -1 end
redis.call('DEL', KEYS[1])
for k = 2, 7 do redis.call('ZREM', KEYS[k], ARGV[2]) end
redis.call('ZREM', KEYS[8], ARGV[3])
redis.call('ZREM', KEYS[9], ARGV[2])
for i = 4, #ARGV do redis.call('ZREM', KEYS[10], ARGV[i]) end
return 1
`);
