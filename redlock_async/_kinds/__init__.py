"""The kinds of lock a user holds, built on the one lock layer (``_core/``).

Read-write locks (``_rwlock``), semaphores (``_semaphore``), multilocks
(``_multilock``), ``adopt()`` (``_adopt``), ``synchronized`` (``_synchronized``),
``closing`` (``_closing``) and what ``Redlock.lock()`` remembers to build
them fast (``_caches``). Each kind is a :class:`~redlock_async._core._commands.Commands`
of its own, and sometimes a subclass of ``Lock``; the factory that hands
them out (``Redlock``) is at the package root.
"""
