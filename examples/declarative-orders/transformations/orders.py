"""The orders job's flow: topic ``orders`` -> per-minute revenue per region -> ``orders-revenue``.

``spark`` is the session spark-pipelines provides. The name server comes from
$APOGEE_NAMESRV, the topics from $APOGEE_SOURCE_TOPIC and $APOGEE_RESULT_TOPIC
(default ``orders`` and ``orders-revenue``; both must exist: ``apogee pipeline
generate-orders`` creates the first and fills it).
"""

import os

from pyspark import pipelines as dp

from apogee.spark.datasource import RocketMQDataSource
from apogee.spark.orders import JobConfig, as_messages, revenue_frame

spark.dataSource.register(RocketMQDataSource)  # noqa: F821  # provided by spark-pipelines
config = JobConfig(
    namesrv=os.environ["APOGEE_NAMESRV"],
    source_topic=os.environ.get("APOGEE_SOURCE_TOPIC", "orders"),
    result_topic=os.environ.get("APOGEE_RESULT_TOPIC", "orders-revenue"),
)
dp.create_sink(
    "revenue_topic",
    "rocketmq",
    {"namesrv": config.namesrv, "topic": config.result_topic, "exactlyOnce": "true"},
)


@dp.append_flow(target="revenue_topic")
def revenue_to_topic():  # type: ignore[no-untyped-def]
    return as_messages(revenue_frame(spark, config))  # noqa: F821
