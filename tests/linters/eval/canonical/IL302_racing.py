"""IL302 canonical shapes: racing tasks with FIRST_COMPLETED and leaving the losers running."""

import asyncio
from asyncio import FIRST_COMPLETED


async def ask(provider, prompt):
    await asyncio.sleep(0.1)
    return provider, prompt


async def fastest_answer(providers, prompt):
    tasks = [asyncio.create_task(ask(p, prompt)) for p in providers]
    done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)  # expect: IL302
    return done.pop().result()


async def fastest_answer_ignoring_pending(providers, prompt):
    tasks = [asyncio.create_task(ask(p, prompt)) for p in providers]
    done, _ = await asyncio.wait(tasks, return_when=FIRST_COMPLETED)  # expect: IL302
    return next(iter(done)).result()


async def fastest_of_list_built_by_append(providers, prompt):
    tasks = []
    for provider in providers:
        tasks.append(asyncio.ensure_future(ask(provider, prompt)))
    done, pending = await asyncio.wait(tasks, return_when=FIRST_COMPLETED)  # expect: IL302
    return [t.result() for t in done]


async def message_or_stop(queue, stop):
    get = asyncio.create_task(queue.get())
    stopped = asyncio.create_task(stop.wait())
    done, pending = await asyncio.wait([get, stopped], return_when=FIRST_COMPLETED)  # expect: IL302
    if get in done:
        return get.result()
    return None


async def first_with_timeout(providers, prompt):
    tasks = {asyncio.create_task(ask(p, prompt)) for p in providers}
    done, pending = await asyncio.wait(  # expect: IL302
        tasks, timeout=5, return_when=asyncio.FIRST_COMPLETED
    )
    if not done:
        raise TimeoutError
    return done.pop().result()


# ok: every pending task is cancelled.
async def fastest_answer_cancelling(providers, prompt):
    tasks = [asyncio.create_task(ask(p, prompt)) for p in providers]
    done, pending = await asyncio.wait(tasks, return_when=FIRST_COMPLETED)
    for task in pending:
        task.cancel()
    return done.pop().result()


# ok: cancelled in a finally, on every path.
async def fastest_answer_finally(providers, prompt):
    tasks = [asyncio.create_task(ask(p, prompt)) for p in providers]
    try:
        done, pending = await asyncio.wait(tasks, return_when=FIRST_COMPLETED)
        return done.pop().result()
    finally:
        for task in tasks:
            task.cancel()


# ok: ALL_COMPLETED leaves nothing pending.
async def all_answers(providers, prompt):
    tasks = [asyncio.create_task(ask(p, prompt)) for p in providers]
    done, _ = await asyncio.wait(tasks)
    return [t.result() for t in done]


# ok: the pending tasks are awaited on the next round of a loop that drains them all.
async def as_they_finish(providers, prompt):
    pending = {asyncio.create_task(ask(p, prompt)) for p in providers}
    results = []
    while pending:
        done, pending = await asyncio.wait(pending, return_when=FIRST_COMPLETED)
        results.extend(t.result() for t in done)
    return results


# ok: the tasks belong to the caller, who passed them in.
async def first_of(tasks):
    done, pending = await asyncio.wait(tasks, return_when=FIRST_COMPLETED)
    return done


# ok: the pending set is returned to the caller, who owns it now.
async def race_and_hand_back(providers, prompt):
    tasks = [asyncio.create_task(ask(p, prompt)) for p in providers]
    done, pending = await asyncio.wait(tasks, return_when=FIRST_COMPLETED)
    return done, pending


# ok: gather cancels nothing but waits for everything.
async def gathered(providers, prompt):
    return await asyncio.gather(*(ask(p, prompt) for p in providers))
