"""IL102 canonical shapes: check-then-act in code that threads share."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

_registry_lock = threading.Lock()
_registry = None
_client = None
_settings = None


def get_registry():
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = {}
        return _registry


def get_client():
    global _client
    if _client is None:
        _client = object()  # expect: IL102
    return _client


def get_settings():
    global _settings
    if _settings is None:
        with _registry_lock:
            _settings = {}  # expect: IL102
    return _settings


class RateLimiter:
    def __init__(self, limit):
        self._lock = threading.Lock()
        self.limit = limit
        self.count = 0
        self.reset_at = 0.0

    def allow(self):
        with self._lock:
            if self.count >= self.limit:
                return False
            self.count += 1
            return True

    def refresh(self):
        if time.monotonic() > self.reset_at:
            self.reset_at = time.monotonic() + 60  # expect: IL102
            self.count = 0

    # ok: the whole check-then-act holds the lock.
    def refresh_locked(self):
        with self._lock:
            if time.monotonic() > self.reset_at:
                self.reset_at = time.monotonic() + 60
                self.count = 0


class Stats:
    def __init__(self):
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.cache = {}

    def hit(self):
        with self._lock:
            self.hits += 1

    def miss(self, key):
        if key not in self.cache:
            # The RacerD gate: state the class never writes under its lock is taken for
            # state one thread owns; without it, held-out precision falls (issue 36).
            self.cache[key] = 0  # miss: IL102
        self.cache[key] += 1

    def lookup(self, key, compute):
        if key in self.cache:
            return self.cache[key]
        value = compute(key)
        self.cache[key] = value  # expect: IL102
        return value

    # ok: setdefault is one atomic step.
    def miss_atomic(self, key):
        with self._lock:
            self.cache.setdefault(key, 0)
            self.cache[key] += 1


class TokenCache:
    def __init__(self):
        self._lock = threading.Lock()
        self.token = None
        self.expires_at = 0.0
        self.refreshes = 0
        self._pool = ThreadPoolExecutor(2)

    def current(self):
        with self._lock:
            return self.token

    def call_all(self, jobs):
        return [self._pool.submit(self.ensure_fresh) for _ in jobs]

    def ensure_fresh(self):
        if time.monotonic() >= self.expires_at:
            self.expires_at = time.monotonic() + 300  # expect: IL102
            self.refreshes += 1

    # ok: the method is not handed to the pool and the state is written under no lock.
    def peek_expiry(self):
        if self.expires_at:
            return self.expires_at
        return None


class Crawler:
    def __init__(self):
        self.seen = set()
        self.pool = ThreadPoolExecutor(4)

    def crawl(self, urls):
        return list(self.pool.map(self.visit, urls))

    def visit(self, url):
        if url in self.seen:
            return None
        self.seen.add(url)  # expect: IL102
        return url

    # ok: nothing acts on the check.
    def known(self, url):
        return url in self.seen


class DoubleChecked:
    _instance = None
    _lock = threading.Lock()

    @classmethod
    def instance(cls):
        # ok: double-checked locking with the re-check under the lock.
        if cls._instance is None:
            with cls._lock:
                if cls._instance is None:
                    cls._instance = cls()
        return cls._instance


class Config:
    _instance = None
    _lock = threading.Lock()

    @classmethod
    def instance(cls):
        # Double-checked locking without the re-check under the lock.
        if cls._instance is None:
            with cls._lock:
                cls._instance = cls()  # expect: IL102
        return cls._instance


class Poller:
    def __init__(self):
        self.started = False
        self.seen = {}
        self._thread = threading.Thread(target=self._run)

    def _run(self):
        self.poll("tick")

    def poll(self, key):
        if key not in self.seen:
            self.seen[key] = []  # expect: IL102
        self.seen[key].append(time.monotonic())

    def start(self):
        if not self.started:
            self.started = True  # expect: IL102
            self._thread.start()

    # ok: reads only.
    def count(self, key):
        return len(self.seen.get(key, ()))


class NoThreads:
    def __init__(self):
        self.cache = {}

    # ok: nothing in this class or module hands it to threads... except the module does;
    # the rule asks for evidence in the class, and this class shows none.
    def get(self, key):
        if key not in self.cache:
            self.cache[key] = len(key)
        return self.cache[key]


# ok: a local, not shared.
def tally(items):
    counts = {}
    for item in items:
        if item not in counts:
            counts[item] = 0
        counts[item] += 1
    return counts


# ok: the lock is held across the check and the write.
def get_registry_again():
    global _registry
    with _registry_lock:
        if _registry is None:
            _registry = {}
    return _registry


class Counter:
    def __init__(self):
        self._lock = threading.Lock()
        self.value = 0

    # ok: the read-modify-write holds the lock.
    def increment(self):
        with self._lock:
            if self.value < 100:
                self.value += 1
