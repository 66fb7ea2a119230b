"""The mqadmin commands, under mqadmin's own names and flags.

Modules: ``topic`` (updateTopic, deleteTopic, topicList, topicRoute,
topicStatus), ``cluster`` (clusterList, brokerStatus, updateBrokerConfig,
wipeWritePerm, addWritePerm), ``ha`` (haStatus), ``group``
(updateSubGroup, consumerProgress), ``message`` (queryMsgById,
queryMsgByKey, sendMessage, consumeMessage), ``acl`` (updateAclConfig,
deleteAclConfig, updateGlobalWhiteAddr, clusterAclConfigVersion);
``_common`` and ``render`` hold what they share.
``apogee.cli.admin`` lists them in ADMIN_COMMANDS and loads each module on
first use.
"""
