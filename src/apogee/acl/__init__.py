"""Access control (RocketMQ's ACL 1.0, "plain access"), shared by broker and name server.

Modules: ``permission`` (PUB/SUB/DENY/ANY bits and their rule), ``address``
(white-address patterns), ``config`` (the ``plain_acl.yml`` document: parsing,
checking, editing), ``resources`` (what each request code needs: admin rights
or topic/group permissions), ``validator`` (the per-request check and the
file it reloads). No asyncio here: the broker and the name server run the
reload timer and put the check in front of their request handlers.
"""
