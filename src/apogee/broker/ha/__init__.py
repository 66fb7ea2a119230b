"""Master/slave replication: the broker's side (the store's side is ``apogee.store.replication``).

Modules: ``transfer`` (SYNC_MASTER waiters), ``master`` (the HA port and its
slave links), ``slave`` (a slave's connection to its master), ``metadata``
(a slave copies topics, groups and offsets), ``role`` (the part the broker
starts and stops for its role, and GET_BROKER_HA_STATUS).
"""
