"""The one lock layer every kind shares: :class:`~._lock.Lock` and its parts.

A lock's state and properties (``_lockstate``), the attempts of ``acquire()``
(``_acquire``: the loop; ``_call``, ``_attempt``, ``_retry``: its state and steps;
``_outage``, ``_refusal``), ``release()`` (``_release``),
``extend()`` (``_extend``), the background renewals and their batches
(``_renewal``, ``_batch``), grants (``_grant``), the holder's body and its
loss (``_holder``), who took a grant (``_holderinfo``), self-deadlock checks
(``_owners``), what each kind sends (``_commands``, ``_scripts``) and what
the lock reports (``_observed``). It imports ``_engine/`` and ``_base/``,
never the kinds of lock above it (``_kinds/``).
"""
