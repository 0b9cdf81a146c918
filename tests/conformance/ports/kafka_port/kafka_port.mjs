// A port of Kafka's timer and purgatory design to JavaScript, written for the conformance
// kit's tests: what an honest porter who follows upstream Kafka writes.
//
// The timer is Kafka's hierarchical timing wheel: levels created on demand, buckets that
// are doubly linked lists appended at the tail, a delay queue of buckets (a binary heap),
// and a drain that polls one expired bucket at a time, moves the wheels to its expiration
// and flushes it, each entry either put back (a finer level) or handed to the executor.
// Integer arithmetic is JavaScript's, which truncates toward zero (Math.trunc, %), as
// Java's does. The purgatory keeps one watcher list per key, times operations in the
// timer, purges completed operations only when its estimate says so, and refuses nothing
// after shutdown: Kafka's behaviour where it differs from the spec (the kit's
// `--allow kafka`). Nothing here reads a clock or starts a thread: the clock is a function
// and the executor an object the caller passes (the adapter gives a manual clock and runs
// tasks inline).

export class IllegalArgument extends Error {}
export class IllegalState extends Error {}
export class Rejected extends Error {}

/** Java's `ms - ms % tick`: rounds toward zero. */
function truncDown(ms, tick) {
  return ms - (ms % tick);
}

/** A task the timer runs once its delay has passed: subclasses define run(). */
export class TimerTask {
  constructor(delayMs) {
    this.delayMs = delayMs;
    this.entry = null;
  }
  cancel() {
    if (this.entry !== null) this.entry.remove();
    this.entry = null;
  }
  setEntry(entry) {
    if (this.entry !== null && this.entry !== entry) this.entry.remove();
    this.entry = entry;
  }
}

/** One scheduling of a task: unlinks the task's previous one when created. */
class TimerTaskEntry {
  constructor(task, expirationMs) {
    this.task = task;
    this.expirationMs = expirationMs;
    this.list = null;
    this.next = null;
    this.prev = null;
    if (task !== null) task.setEntry(this);
  }
  cancelled() {
    return this.task.entry !== this;
  }
  remove() {
    if (this.list !== null) this.list.remove(this);
  }
}

/** A bucket: a circular doubly linked list with a dummy root, and an expiration (-1: unset). */
class TimerTaskList {
  constructor(counter) {
    this.counter = counter;
    this.expiration = -1;
    this.root = new TimerTaskEntry(null, -1);
    this.root.next = this.root;
    this.root.prev = this.root;
  }
  /** Sets the expiration; true iff it changed (the bucket must then be queued). */
  setExpiration(ms) {
    const changed = this.expiration !== ms;
    this.expiration = ms;
    return changed;
  }
  add(entry) {
    entry.remove();
    const tail = this.root.prev;
    entry.next = this.root;
    entry.prev = tail;
    entry.list = this;
    tail.next = entry;
    this.root.prev = entry;
    this.counter.count += 1;
  }
  remove(entry) {
    if (entry.list !== this) return;
    entry.next.prev = entry.prev;
    entry.prev.next = entry.next;
    entry.next = entry.prev = entry.list = null;
    this.counter.count -= 1;
  }
  /** Takes every entry out, head first, and gives each to f; then unsets the expiration. */
  flush(f) {
    let head = this.root.next;
    while (head !== this.root) {
      this.remove(head);
      f(head);
      head = this.root.next;
    }
    this.expiration = -1;
  }
}

/** The delay queue: a binary min-heap of buckets by expiration. */
class DelayQueue {
  constructor() {
    this.heap = [];
  }
  offer(bucket) {
    const heap = this.heap;
    let index = heap.length;
    heap.push(bucket);
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (bucket.expiration >= heap[parent].expiration) break;
      heap[index] = heap[parent];
      index = parent;
    }
    heap[index] = bucket;
  }
  /** The bucket of least expiration if it has expired at nowMs (taken out), else null. */
  poll(nowMs) {
    const heap = this.heap;
    if (heap.length === 0 || heap[0].expiration > nowMs) return null;
    const head = heap[0];
    const last = heap.pop();
    const size = heap.length;
    if (size > 0) {
      let index = 0;
      while (index < size >> 1) {
        let child = 2 * index + 1;
        if (child + 1 < size && heap[child].expiration > heap[child + 1].expiration) child += 1;
        if (last.expiration <= heap[child].expiration) break;
        heap[index] = heap[child];
        index = child;
      }
      heap[index] = last;
    }
    return head;
  }
}

/** One level of the hierarchical wheel; the next level is created when an entry overflows. */
class TimingWheel {
  constructor(tickMs, wheelSize, startMs, counter, queue) {
    this.tickMs = tickMs;
    this.wheelSize = wheelSize;
    this.interval = tickMs * wheelSize;
    this.counter = counter;
    this.queue = queue;
    this.currentTime = truncDown(startMs, tickMs);
    this.buckets = Array.from({ length: wheelSize }, () => new TimerTaskList(counter));
    this.overflow = null;
  }
  /** Links the entry into its bucket (true), or false if it is cancelled or already expired. */
  add(entry) {
    const expiration = entry.expirationMs;
    if (entry.cancelled()) return false;
    if (expiration < this.currentTime + this.tickMs) return false;
    if (expiration < this.currentTime + this.interval) {
      const virtualId = Math.trunc(expiration / this.tickMs);
      const bucket = this.buckets[virtualId % this.wheelSize];
      if (bucket === undefined) throw new RangeError(`bucket index ${virtualId % this.wheelSize}`);
      bucket.add(entry);
      if (bucket.setExpiration(virtualId * this.tickMs)) this.queue.offer(bucket);
      return true;
    }
    if (this.overflow === null) {
      this.overflow = new TimingWheel(this.interval, this.wheelSize, this.currentTime, this.counter, this.queue);
    }
    return this.overflow.add(entry);
  }
  advanceClock(timeMs) {
    if (timeMs >= this.currentTime + this.tickMs) {
      this.currentTime = truncDown(timeMs, this.tickMs);
      if (this.overflow !== null) this.overflow.advanceClock(this.currentTime);
    }
  }
}

/** The timer: a wheel, its delay queue and an executor (`submit(task)`, `shutdown()`). */
export class SystemTimer {
  constructor(tickMs, wheelSize, startMs, nowMs, executor) {
    this.nowMs = nowMs;
    this.executor = executor;
    this.counter = { count: 0 };
    this.queue = new DelayQueue();
    this.wheel = new TimingWheel(tickMs, wheelSize, startMs, this.counter, this.queue);
  }
  get size() {
    return this.counter.count;
  }
  add(task) {
    this.addEntry(new TimerTaskEntry(task, task.delayMs + this.nowMs()));
  }
  addEntry(entry) {
    if (!this.wheel.add(entry) && !entry.cancelled()) this.executor.submit(entry.task);
  }
  /** Polls the expired buckets one at a time at the clock's reading; true iff it polled one. */
  advanceClock() {
    let bucket = this.queue.poll(this.nowMs());
    if (bucket === null) return false;
    while (bucket !== null) {
      this.wheel.advanceClock(bucket.expiration);
      bucket.flush((entry) => this.addEntry(entry));
      bucket = this.queue.poll(this.nowMs());
    }
    return true;
  }
  close() {
    this.executor.shutdown();
  }
}

/** An operation that completes once, by tryComplete, forceComplete or expiry. */
export class DelayedOperation extends TimerTask {
  constructor(delayMs) {
    super(delayMs);
    this.completed = false;
  }
  forceComplete() {
    if (this.completed) return false;
    this.completed = true;
    this.cancel();
    this.onComplete();
    return true;
  }
  safeTryComplete() {
    return this.completed ? false : this.tryComplete();
  }
  safeTryCompleteOrElse(action) {
    if (this.tryComplete()) return true;
    action();
    return this.tryComplete();
  }
  run() {
    if (this.forceComplete()) this.onExpiration();
  }
}

/** Watcher lists by key, the timer for timeouts, and the purge of completed operations. */
export class DelayedOperationPurgatory {
  constructor(timer, purgeInterval, timerEnabled) {
    this.timer = timer;
    this.purgeInterval = purgeInterval;
    this.timerEnabled = timerEnabled;
    this.watchersByKey = new Map();
    this.estimatedTotalOperations = 0;
    this.numPurged = 0;
  }
  get watched() {
    let sum = 0;
    for (const operations of this.watchersByKey.values()) sum += operations.length;
    return sum;
  }
  get numDelayed() {
    return this.timer.size;
  }
  tryCompleteElseWatch(operation, keys) {
    if (keys.length === 0) throw new IllegalArgument("the watch key list can't be empty");
    const watched = operation.safeTryCompleteOrElse(() => {
      for (const key of keys) if (!operation.completed) this.watch(key, operation);
      this.estimatedTotalOperations += 1;
    });
    if (watched) return true;
    if (!operation.completed) {
      if (this.timerEnabled) this.timer.add(operation);
      if (operation.completed) operation.cancel();
    }
    return false;
  }
  checkAndComplete(key) {
    const operations = this.watchersByKey.get(key);
    if (operations === undefined) return 0;
    let completed = 0;
    for (const operation of [...operations]) {
      if (operation.completed) {
        this.unwatch(key, operations, operation);
      } else if (operation.safeTryComplete()) {
        this.unwatch(key, operations, operation);
        completed += 1;
      }
    }
    this.dropIfEmpty(key, operations);
    return completed;
  }
  cancelForKey(key) {
    const operations = this.watchersByKey.get(key);
    if (operations === undefined) return [];
    this.watchersByKey.delete(key);
    const cancelled = [];
    while (operations.length > 0) {
      const operation = operations.shift();
      operation.cancel();
      cancelled.push(operation);
    }
    return cancelled;
  }
  advanceClock() {
    this.timer.advanceClock();
    if (this.estimatedTotalOperations - this.numDelayed > this.purgeInterval) {
      this.estimatedTotalOperations = this.numDelayed;
      for (const [key, operations] of [...this.watchersByKey]) {
        for (const operation of [...operations]) {
          if (operation.completed) {
            this.unwatch(key, operations, operation);
            this.numPurged += 1;
          }
        }
        this.dropIfEmpty(key, operations);
      }
    }
  }
  shutdown() {
    this.timer.close();
  }
  watch(key, operation) {
    let operations = this.watchersByKey.get(key);
    if (operations === undefined) {
      operations = [];
      this.watchersByKey.set(key, operations);
    }
    operations.push(operation);
  }
  unwatch(key, operations, operation) {
    const index = operations.indexOf(operation);
    if (index >= 0) operations.splice(index, 1);
  }
  dropIfEmpty(key, operations) {
    if (operations.length === 0 && this.watchersByKey.get(key) === operations) this.watchersByKey.delete(key);
  }
}
