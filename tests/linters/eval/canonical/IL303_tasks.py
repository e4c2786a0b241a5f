"""IL303 canonical shapes: iterating a shared container while the loop body awaits."""

import asyncio


class Supervisor:
    def __init__(self):
        self._tasks = {}
        self._workers = []
        self._subscribers = set()
        self._handlers = {}

    def spawn(self, name, coro):
        task = asyncio.ensure_future(coro)
        self._tasks[name] = task
        task.add_done_callback(lambda t: self._tasks.pop(name, None))
        return task

    async def join_all(self):
        for name, task in self._tasks.items():  # expect: IL303
            await task

    async def stop_all(self):
        for task in self._tasks.values():  # expect: IL303
            task.cancel()
            await asyncio.sleep(0)

    async def report(self):
        for name in self._tasks:  # expect: IL303
            await asyncio.sleep(0.1)
            print(name)

    def unsubscribe(self, callback):
        self._subscribers.discard(callback)

    async def broadcast(self, event):
        for callback in self._subscribers:  # expect: IL303
            await callback(event)

    async def remove_handler(self, key):
        await asyncio.sleep(0)
        del self._handlers[key]

    async def dispatch(self, event):
        for key, handler in self._handlers.items():  # expect: IL303
            await handler(event)

    # ok: iterates a snapshot.
    async def join_all_snapshot(self):
        for name, task in list(self._tasks.items()):
            await task

    # ok: no suspension in the loop body.
    def cancel_all(self):
        for task in self._tasks.values():
            task.cancel()

    # ok: a snapshot of the set.
    async def broadcast_snapshot(self, event):
        for callback in tuple(self._subscribers):
            await callback(event)

    # ok: the loop awaits, but over a local list nobody else sees.
    async def run_local(self, jobs):
        results = []
        for job in [j for j in jobs]:
            results.append(await job())
        return results

    # ok: sorted() copies.
    async def dispatch_sorted(self, event):
        for key in sorted(self._handlers):
            await self._handlers[key](event)

    # ok: gather takes a snapshot when it is called.
    async def join_gathered(self):
        await asyncio.gather(*self._tasks.values())


class Pool:
    def __init__(self):
        self._conns = []

    def add(self, conn):
        self._conns.append(conn)

    async def ping_all(self):
        # ok: other code only appends to this list, and a list iterator sees the new end.
        for conn in self._conns:
            await conn.ping()


class Orchestrator:
    def __init__(self):
        self.tasks = {}
        self.background = set()
        self.plugins = {}

    def start(self, name, coro):
        self.tasks[name] = asyncio.create_task(coro)

    def fire(self, coro):
        self.background.add(asyncio.ensure_future(coro))

    def register(self, name, plugin):
        self.plugins[name] = plugin

    async def wait_all(self):
        for name, task in self.tasks.items():  # expect: IL303
            print(name, await task)

    async def drain(self):
        for task in self.background:  # expect: IL303
            await task

    # ok: plugins are registered at setup time; the rule takes that for no concurrent change.
    async def load_plugins(self):
        for plugin in self.plugins.values():
            await plugin.load()

    # ok: iterates a copy of the tasks.
    async def wait_all_copy(self):
        for name, task in dict(self.tasks).items():
            print(name, await task)
