"""IL302 eval: pending tasks of asyncio.wait(FIRST_COMPLETED) not cancelled on every path.

Every expected finding carries a trailing ``# error: IL302`` on the line of the wait call.
Negatives are named in a comment starting with ``# ok:``.
"""

import asyncio
import asyncio as aio
from asyncio import FIRST_COMPLETED
from asyncio import FIRST_COMPLETED as FIRST
from asyncio import wait


class BaseAgent:
    def __init__(self):
        self.output_queue = asyncio.Queue()
        self.task_done = asyncio.Event()

    # Seed 000's stream(): the queue.get() task leaks and later swallows an item.
    async def stream(self):
        while not (self.task_done.is_set() or self.output_queue.empty()):
            queue_task = asyncio.create_task(self.output_queue.get())
            task_done_task = asyncio.create_task(self.task_done.wait())
            done, pending = await asyncio.wait(  # error: IL302
                [queue_task, task_done_task], return_when=asyncio.FIRST_COMPLETED
            )
            if queue_task in done:
                yield queue_task.result()

    # ok: the pending tasks are cancelled in `finally` on every path.
    async def stream_fixed(self):
        while not (self.task_done.is_set() and self.output_queue.empty()):
            queue_task = asyncio.create_task(self.output_queue.get())
            task_done_task = asyncio.create_task(self.task_done.wait())
            try:
                done, pending = await asyncio.wait(
                    [queue_task, task_done_task], return_when=asyncio.FIRST_COMPLETED
                )
            finally:
                for task in (queue_task, task_done_task):
                    task.cancel()
            if queue_task in done:
                yield queue_task.result()

    # ok: a cancel loop right after the wait, before any exit.
    async def next_item(self):
        get = asyncio.create_task(self.output_queue.get())
        stop = asyncio.create_task(self.task_done.wait())
        done, pending = await asyncio.wait({get, stop}, return_when=FIRST_COMPLETED)
        for task in pending:
            task.cancel()
        if get in done:
            return get.result()
        return None

    async def next_item_early_return(self):
        get = asyncio.create_task(self.output_queue.get())
        stop = asyncio.create_task(self.task_done.wait())
        done, pending = await wait({get, stop}, return_when=FIRST)  # error: IL302
        if stop in done:
            return None
        for task in pending:
            task.cancel()
        return get.result()

    # ok: a same-file helper cancels its argument.
    async def next_item_helper(self):
        get = asyncio.create_task(self.output_queue.get())
        stop = asyncio.create_task(self.task_done.wait())
        done, pending = await aio.wait({get, stop}, return_when=aio.FIRST_COMPLETED)
        _cancel_all(pending)
        return get.result() if get in done else None

    async def race_discarding_pending(self, fetch_a, fetch_b):
        done, _ = await aio.wait(  # error: IL302
            {aio.create_task(fetch_a()), aio.create_task(fetch_b())},
            return_when=aio.FIRST_COMPLETED,
        )
        return done.pop().result()

    # ok: the tasks are the caller's (parameters); this function does not own them.
    async def race_callers_tasks(self, a, b):
        done, _ = await aio.wait({a, b}, return_when=aio.FIRST_COMPLETED)
        return done.pop().result()

    # ok: the set is a collection the code keeps managing after the wait.
    async def supervise(self):
        while self.workers:
            done, _ = await asyncio.wait(self.workers, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                self.workers.discard(task)

    # ok: ALL_COMPLETED (the default) leaves nothing pending.
    async def all_of(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        done, pending = await asyncio.wait({a, b})
        return done

    # ok: a draining loop waits on the pending set again until it is empty.
    async def as_they_finish(self, tasks):
        pending = set(tasks)
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                print(task.result())

    # ok: the pending set is returned to the caller, who owns it now.
    async def first_of(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        done, pending = await asyncio.wait([a, b], return_when=asyncio.FIRST_COMPLETED)
        return done, pending

    # ok: a list comprehension cancels the pending tasks.
    async def first_result(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        done, pending = await asyncio.wait((a, b), return_when="FIRST_COMPLETED")
        [task.cancel() for task in pending]
        return next(iter(done)).result()

    # ok: the finally block cancels the getter only if it is still running.
    async def guarded_cleanup(self, ready):
        getter = asyncio.create_task(self.output_queue.get())
        try:
            await asyncio.wait({ready, getter}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        return getter.result() if getter.done() else None

    async def cancel_on_one_branch(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        done, pending = await asyncio.wait(  # error: IL302
            {a, b}, return_when=asyncio.FIRST_COMPLETED
        )
        if a in done:
            for task in pending:
                task.cancel()
        return done

    async def raise_before_cancel(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        done, pending = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)  # error: IL302
        for task in done:
            if task.exception() is not None:
                raise task.exception()
        for task in pending:
            task.cancel()

    # ok: cancelled with a timeout handler too, all inside one try/finally.
    async def with_timeout(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        try:
            done, pending = await asyncio.wait(
                {a, b}, timeout=5, return_when=asyncio.FIRST_COMPLETED
            )
            if not done:
                raise TimeoutError("nothing finished")
            return done.pop().result()
        finally:
            a.cancel()
            b.cancel()

    # ok: the `finally` cancels and gathers both tasks through lists built from them
    # (google-adk's LiveKit runner): a filtered comprehension, then a starred merge.
    async def run_call(self, session_events, ended):
        session = None
        hung_up = None
        try:
            session = asyncio.create_task(session_events())
            hung_up = asyncio.create_task(ended.wait())
            done, _ = await asyncio.wait({session, hung_up}, return_when=asyncio.FIRST_COMPLETED)
            if session in done:
                session.result()
        finally:
            started: list[asyncio.Task] = [t for t in (session, hung_up) if t is not None]
            pending = [*started, *self.forwarders]
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    # ok: a task kept across iterations on purpose; the `finally` around the loop cancels
    # whatever is still running (google-adk's `_consume_event_queue`).
    async def consume(self, abort):
        abort_task = None
        get_task = None
        try:
            while True:
                if abort_task is None or abort_task.done():
                    abort_task = asyncio.create_task(abort.wait())
                get_task = asyncio.create_task(self.output_queue.get())
                await asyncio.wait([get_task, abort_task], return_when=asyncio.FIRST_COMPLETED)
                if not get_task.done():
                    break
                yield get_task.result()
                get_task = None
        finally:
            live = [t for t in (get_task, abort_task) if t is not None and not t.done()]
            for task in live:
                task.cancel()
            if live:
                await asyncio.wait(live)

    # ok: the only task this function created is done when it returns; what is still
    # pending then is the long-lived background task it does not own (google-adk's
    # `_run_guarded`).
    async def run_guarded(self, coro):
        call = asyncio.ensure_future(coro)
        done, _ = await asyncio.wait([call, self.background], return_when=FIRST_COMPLETED)
        if call in done:
            return call.result()
        call.cancel()
        raise ConnectionError("background task ended")

    async def run_guarded_with_probe(self, coro, probe):
        call = asyncio.ensure_future(coro)
        ping = asyncio.ensure_future(probe())
        done, _ = await asyncio.wait(  # error: IL302
            [call, ping, self.background], return_when=FIRST_COMPLETED
        )
        if call in done:
            return call.result()
        call.cancel()
        raise ConnectionError("background task ended")

    async def cancel_only_finished(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        tasks = [a, b]
        try:
            done, pending = await asyncio.wait(  # error: IL302
                [a, b], return_when=asyncio.FIRST_COMPLETED
            )
            return done.pop().result()
        finally:
            tasks = [t for t in tasks if t.done()]
            for task in tasks:
                task.cancel()

    async def cancel_in_finally_after_return(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        done, _ = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)  # error: IL302
        if b in done:
            return None
        tasks = (a, b)
        try:
            return await self.use(a.result())
        finally:
            for task in tasks:
                task.cancel()


    # ok: a loop over a tuple of the tasks hands each one to a canceller.
    async def cancel_each_through_a_helper(self, fetch_a, fetch_b, manager):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        try:
            done, _ = await asyncio.wait({a, b}, return_when=asyncio.FIRST_COMPLETED)
            return done.pop().result()
        finally:
            for task in (a, b):
                if not task.done():
                    await manager.cancel_task(task)

    # A loop that only logs each task cancels nothing.
    async def log_each(self, fetch_a, fetch_b):
        a, b = asyncio.create_task(fetch_a()), asyncio.create_task(fetch_b())
        try:
            done, _ = await asyncio.wait(  # error: IL302
                {a, b}, return_when=asyncio.FIRST_COMPLETED
            )
            return done.pop().result()
        finally:
            for task in (a, b):
                print(task)


class Consumer:
    # ok: futures another object made (a position future, an unassignment future); since 3.11
    # `asyncio.wait` takes no coroutines, so the calls return futures this function did not
    # start, and leaving one pending leaks nothing of its own.
    async def position(self, state, assignment):
        fut = self._fetcher.request_reset(state)
        await asyncio.wait(
            [state.wait_for_position(), assignment.unassign_future, fut],
            timeout=self._timeout,
            return_when=asyncio.FIRST_COMPLETED,
        )
        return state.position

    # One task it started among futures it did not: that task leaks.
    async def next_record(self, assignment):
        fetch = None
        fetch = asyncio.ensure_future(self._queue.get())
        done, _ = await asyncio.wait(  # error: IL302
            [fetch, assignment.unassign_future], return_when=asyncio.FIRST_COMPLETED
        )
        return fetch.result() if fetch in done else None


def _cancel_all(tasks):
    for task in tasks:
        task.cancel()


# ok: `wait` here is not asyncio.wait.
async def not_asyncio(cond):
    async with cond:
        await cond.wait()


# ok: a function defined inside this one cancels and awaits the task it closes over, on the
# timeout path and on cancellation; on the other path the task is done.
async def lock_with_timeout(lock, timeout):
    acquire = asyncio.create_task(lock.acquire())

    async def _abandon():
        acquire.cancel()
        try:
            await acquire
        except asyncio.CancelledError:
            pass

    try:
        done, _ = await asyncio.wait({acquire}, timeout=timeout, return_when=FIRST_COMPLETED)
    except asyncio.CancelledError:
        await asyncio.shield(_abandon())
        raise
    if acquire not in done:
        await _abandon()
        return False
    return True


async def closure_that_only_reads(q, e):
    a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())

    def report():
        print(a.done(), b.done())

    done, _ = await asyncio.wait({a, b}, return_when=FIRST_COMPLETED)  # error: IL302
    report()
    return done


async def closure_whose_task_is_its_own(q, e):
    a, b = asyncio.create_task(q.get()), asyncio.create_task(e.wait())

    def stop(a):
        a.cancel()

    done, _ = await asyncio.wait({a, b}, return_when=FIRST_COMPLETED)  # error: IL302
    stop(None)
    return done
