"""``apogee admin``: mqadmin-style commands, loaded lazily by name.

Owns: the admin command table. Each entry points at a click command defined
next to the code it drives (``apogee.admin.*``).
"""

from __future__ import annotations

import click

from apogee.cli.main import LazyGroup

# mqadmin command name -> "module:attribute"
ADMIN_COMMANDS: dict[str, str] = {}
ADMIN_COMMANDS["store-verify"] = "apogee.admin.inspect:store_verify"


@click.group(cls=LazyGroup, lazy_commands=ADMIN_COMMANDS)
def admin() -> None:
    """Administer a cluster (mqadmin command names and flags)."""


# mqadmin's sub-commands, under mqadmin's names so operators' habits carry over
ADMIN_COMMANDS.update(
    {
        "updateTopic": "apogee.admin.cli.topic:update_topic",
        "deleteTopic": "apogee.admin.cli.topic:delete_topic",
        "topicList": "apogee.admin.cli.topic:topic_list",
        "topicRoute": "apogee.admin.cli.topic:topic_route",
        "topicStatus": "apogee.admin.cli.topic:topic_status",
        "clusterList": "apogee.admin.cli.cluster:cluster_list",
        "brokerStatus": "apogee.admin.cli.cluster:broker_status",
        "updateBrokerConfig": "apogee.admin.cli.cluster:update_broker_config",
        "wipeWritePerm": "apogee.admin.cli.cluster:wipe_write_perm",
        "addWritePerm": "apogee.admin.cli.cluster:add_write_perm",
        "haStatus": "apogee.admin.cli.ha:ha_status",
        "updateSubGroup": "apogee.admin.cli.group:update_sub_group",
        "consumerProgress": "apogee.admin.cli.group:consumer_progress",
        "queryMsgById": "apogee.admin.cli.message:query_msg_by_id",
        "queryMsgByKey": "apogee.admin.cli.message:query_msg_by_key",
        "sendMessage": "apogee.admin.cli.message:send_message",
        "consumeMessage": "apogee.admin.cli.message:consume_message",
        "updateAclConfig": "apogee.admin.cli.acl:update_acl_config",
        "deleteAclConfig": "apogee.admin.cli.acl:delete_acl_config",
        "updateGlobalWhiteAddr": "apogee.admin.cli.acl:update_global_white_addr",
        "clusterAclConfigVersion": "apogee.admin.cli.acl:cluster_acl_config_version",
        "topicClusterList": "apogee.admin.cli.topic:topic_cluster_list",
        "getBrokerConfig": "apogee.admin.cli.cluster:get_broker_config",
        "deleteSubGroup": "apogee.admin.cli.consumer:delete_sub_group",
        "consumerConnection": "apogee.admin.cli.consumer:consumer_connection",
        "producerConnection": "apogee.admin.cli.consumer:producer_connection",
        "consumerStatus": "apogee.admin.cli.consumer:consumer_status",
        "resetOffsetByTime": "apogee.admin.cli.consumer:reset_offset_by_time",
        "skipAccumulatedMessage": "apogee.admin.cli.consumer:skip_accumulated_message",
        "statsAll": "apogee.admin.cli.consumer:stats_all",
        "dlq": "apogee.admin.cli.consumer:dlq",
        "queryMsgByUniqueKey": "apogee.admin.cli.browse:query_msg_by_unique_key",
        "queryMsgByOffset": "apogee.admin.cli.browse:query_msg_by_offset",
        "printMsg": "apogee.admin.cli.browse:print_msg",
        "printMsgByQueue": "apogee.admin.cli.browse:print_msg_by_queue",
    }
)
