"""Every API the broker speaks, declared once as data.

Transcribed from Kafka's message schemas (facts only: names, types, versions,
defaults), limited to the version ranges kafkarepl supports. codec.py compiles these.
"""

from __future__ import annotations

from .schema import (
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UUID,
    ApiKey,
    ApiSpec,
    api,
)
from .schema import Array as A
from .schema import Field as F
from .schema import Struct as S

PRODUCE = api(
    ApiKey.PRODUCE, 'Produce', '3-9', '9+',
    request=[
        F('TransactionalId', STRING, '3+', nullable='3+', default=None),
        F('Acks', INT16, '0+'),
        F('TimeoutMs', INT32, '0+'),
        F('TopicData', A(S(
            F('Name', STRING, '0+'),
            F('PartitionData', A(S(
                F('Index', INT32, '0+'),
                F('Records', RECORDS, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('Responses', A(S(
            F('Name', STRING, '0+'),
            F('PartitionResponses', A(S(
                F('Index', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('BaseOffset', INT64, '0+'),
                F('LogAppendTimeMs', INT64, '2+', default=-1),
                F('LogStartOffset', INT64, '5+', default=-1),
                F('RecordErrors', A(S(
                    F('BatchIndex', INT32, '8+'),
                    F('BatchIndexErrorMessage', STRING, '8+', nullable='8+', default=None),
                  )), '8+'),
                F('ErrorMessage', STRING, '8+', nullable='8+', default=None),
              )), '0+'),
          )), '0+'),
        F('ThrottleTimeMs', INT32, '1+'),
    ],
)

FETCH = api(
    ApiKey.FETCH, 'Fetch', '4-12', '12+',
    request=[
        F('ClusterId', STRING, '12+', nullable='12+', tagged='12+', tag=0, default=None),
        F('ReplicaId', INT32, '0-14', default=-1),
        F('MaxWaitMs', INT32, '0+'),
        F('MinBytes', INT32, '0+'),
        F('MaxBytes', INT32, '3+', default=2147483647),
        F('IsolationLevel', INT8, '4+'),
        F('SessionId', INT32, '7+'),
        F('SessionEpoch', INT32, '7+', default=-1),
        F('Topics', A(S(
            F('Topic', STRING, '0-12'),
            F('Partitions', A(S(
                F('Partition', INT32, '0+'),
                F('CurrentLeaderEpoch', INT32, '9+', default=-1),
                F('FetchOffset', INT64, '0+'),
                F('LastFetchedEpoch', INT32, '12+', default=-1),
                F('LogStartOffset', INT64, '5+', default=-1),
                F('PartitionMaxBytes', INT32, '0+'),
              )), '0+'),
          )), '0+'),
        F('ForgottenTopicsData', A(S(
            F('Topic', STRING, '7-12'),
            F('Partitions', A(INT32), '7+'),
          )), '7+'),
        F('RackId', STRING, '11+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '7+'),
        F('SessionId', INT32, '7+'),
        F('Responses', A(S(
            F('Topic', STRING, '0-12'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('HighWatermark', INT64, '0+'),
                F('LastStableOffset', INT64, '4+', default=-1),
                F('LogStartOffset', INT64, '5+', default=-1),
                F('DivergingEpoch', S(
                    F('Epoch', INT32, '12+', default=-1),
                    F('EndOffset', INT64, '12+', default=-1),
                  ), '12+', tagged='12+', tag=0),
                F('CurrentLeader', S(
                    F('LeaderId', INT32, '12+', default=-1),
                    F('LeaderEpoch', INT32, '12+', default=-1),
                  ), '12+', tagged='12+', tag=1),
                F('SnapshotId', S(
                    F('EndOffset', INT64, '0+', default=-1),
                    F('Epoch', INT32, '0+', default=-1),
                  ), '12+', tagged='12+', tag=2),
                F('AbortedTransactions', A(S(
                    F('ProducerId', INT64, '4+'),
                    F('FirstOffset', INT64, '4+'),
                  )), '4+', nullable='4+'),
                F('PreferredReadReplica', INT32, '11+', default=-1),
                F('Records', RECORDS, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
    ],
)

LIST_OFFSETS = api(
    ApiKey.LIST_OFFSETS, 'ListOffsets', '1-7', '6+',
    request=[
        F('ReplicaId', INT32, '0+'),
        F('IsolationLevel', INT8, '2+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('CurrentLeaderEpoch', INT32, '4+', default=-1),
                F('Timestamp', INT64, '0+'),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '2+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('Timestamp', INT64, '1+', default=-1),
                F('Offset', INT64, '1+', default=-1),
                F('LeaderEpoch', INT32, '4+', default=-1),
              )), '0+'),
          )), '0+'),
    ],
)

METADATA = api(
    ApiKey.METADATA, 'Metadata', '0-12', '9+',
    request=[
        F('Topics', A(S(
            F('TopicId', UUID, '10+'),
            F('Name', STRING, '0+', nullable='10+'),
          )), '0+', nullable='1+'),
        F('AllowAutoTopicCreation', BOOL, '4+', default=True),
        F('IncludeClusterAuthorizedOperations', BOOL, '8-10'),
        F('IncludeTopicAuthorizedOperations', BOOL, '8+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '3+'),
        F('Brokers', A(S(
            F('NodeId', INT32, '0+'),
            F('Host', STRING, '0+'),
            F('Port', INT32, '0+'),
            F('Rack', STRING, '1+', nullable='1+', default=None),
          )), '0+'),
        F('ClusterId', STRING, '2+', nullable='2+', default=None),
        F('ControllerId', INT32, '1+', default=-1),
        F('Topics', A(S(
            F('ErrorCode', INT16, '0+'),
            F('Name', STRING, '0+', nullable='12+'),
            F('TopicId', UUID, '10+'),
            F('IsInternal', BOOL, '1+'),
            F('Partitions', A(S(
                F('ErrorCode', INT16, '0+'),
                F('PartitionIndex', INT32, '0+'),
                F('LeaderId', INT32, '0+'),
                F('LeaderEpoch', INT32, '7+', default=-1),
                F('ReplicaNodes', A(INT32), '0+'),
                F('IsrNodes', A(INT32), '0+'),
                F('OfflineReplicas', A(INT32), '5+'),
              )), '0+'),
            F('TopicAuthorizedOperations', INT32, '8+', default=-2147483648),
          )), '0+'),
        F('ClusterAuthorizedOperations', INT32, '8-10', default=-2147483648),
    ],
)

LEADER_AND_ISR = api(
    ApiKey.LEADER_AND_ISR, 'LeaderAndIsr', '0-6', '4+',
    request=[
        F('ControllerId', INT32, '0+'),
        F('ControllerEpoch', INT32, '0+'),
        F('BrokerEpoch', INT64, '2+', default=-1),
        F('Type', INT8, '5+'),
        F('UngroupedPartitionStates', A(S(
            F('TopicName', STRING, '0-1'),
            F('PartitionIndex', INT32, '0+'),
            F('ControllerEpoch', INT32, '0+'),
            F('Leader', INT32, '0+'),
            F('LeaderEpoch', INT32, '0+'),
            F('Isr', A(INT32), '0+'),
            F('PartitionEpoch', INT32, '0+'),
            F('Replicas', A(INT32), '0+'),
            F('AddingReplicas', A(INT32), '3+'),
            F('RemovingReplicas', A(INT32), '3+'),
            F('IsNew', BOOL, '1+'),
            F('LeaderRecoveryState', INT8, '6+'),
          )), '0-1'),
        F('TopicStates', A(S(
            F('TopicName', STRING, '2+'),
            F('TopicId', UUID, '5+'),
            F('PartitionStates', A(S(
                F('TopicName', STRING, '0-1'),
                F('PartitionIndex', INT32, '0+'),
                F('ControllerEpoch', INT32, '0+'),
                F('Leader', INT32, '0+'),
                F('LeaderEpoch', INT32, '0+'),
                F('Isr', A(INT32), '0+'),
                F('PartitionEpoch', INT32, '0+'),
                F('Replicas', A(INT32), '0+'),
                F('AddingReplicas', A(INT32), '3+'),
                F('RemovingReplicas', A(INT32), '3+'),
                F('IsNew', BOOL, '1+'),
                F('LeaderRecoveryState', INT8, '6+'),
              )), '2+'),
          )), '2+'),
        F('LiveLeaders', A(S(
            F('BrokerId', INT32, '0+'),
            F('HostName', STRING, '0+'),
            F('Port', INT32, '0+'),
          )), '0+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('PartitionErrors', A(S(
            F('TopicName', STRING, '0-4'),
            F('PartitionIndex', INT32, '0+'),
            F('ErrorCode', INT16, '0+'),
          )), '0-4'),
        F('Topics', A(S(
            F('TopicId', UUID, '5+'),
            F('PartitionErrors', A(S(
                F('TopicName', STRING, '0-4'),
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
              )), '5+'),
          )), '5+'),
    ],
)

STOP_REPLICA = api(
    ApiKey.STOP_REPLICA, 'StopReplica', '0-3', '2+',
    request=[
        F('ControllerId', INT32, '0+'),
        F('ControllerEpoch', INT32, '0+'),
        F('BrokerEpoch', INT64, '1+', default=-1),
        F('DeletePartitions', BOOL, '0-2'),
        F('UngroupedPartitions', A(S(
            F('TopicName', STRING, '0'),
            F('PartitionIndex', INT32, '0'),
          )), '0'),
        F('Topics', A(S(
            F('Name', STRING, '1-2'),
            F('PartitionIndexes', A(INT32), '1-2'),
          )), '1-2'),
        F('TopicStates', A(S(
            F('TopicName', STRING, '3+'),
            F('PartitionStates', A(S(
                F('PartitionIndex', INT32, '3+'),
                F('LeaderEpoch', INT32, '3+', default=-1),
                F('DeletePartition', BOOL, '3+'),
              )), '3+'),
          )), '3+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('PartitionErrors', A(S(
            F('TopicName', STRING, '0+'),
            F('PartitionIndex', INT32, '0+'),
            F('ErrorCode', INT16, '0+'),
          )), '0+'),
    ],
)

UPDATE_METADATA = api(
    ApiKey.UPDATE_METADATA, 'UpdateMetadata', '0-7', '6+',
    request=[
        F('ControllerId', INT32, '0+'),
        F('ControllerEpoch', INT32, '0+'),
        F('BrokerEpoch', INT64, '5+', default=-1),
        F('UngroupedPartitionStates', A(S(
            F('TopicName', STRING, '0-4'),
            F('PartitionIndex', INT32, '0+'),
            F('ControllerEpoch', INT32, '0+'),
            F('Leader', INT32, '0+'),
            F('LeaderEpoch', INT32, '0+'),
            F('Isr', A(INT32), '0+'),
            F('ZkVersion', INT32, '0+'),
            F('Replicas', A(INT32), '0+'),
            F('OfflineReplicas', A(INT32), '4+'),
          )), '0-4'),
        F('TopicStates', A(S(
            F('TopicName', STRING, '5+'),
            F('TopicId', UUID, '7+'),
            F('PartitionStates', A(S(
                F('TopicName', STRING, '0-4'),
                F('PartitionIndex', INT32, '0+'),
                F('ControllerEpoch', INT32, '0+'),
                F('Leader', INT32, '0+'),
                F('LeaderEpoch', INT32, '0+'),
                F('Isr', A(INT32), '0+'),
                F('ZkVersion', INT32, '0+'),
                F('Replicas', A(INT32), '0+'),
                F('OfflineReplicas', A(INT32), '4+'),
              )), '5+'),
          )), '5+'),
        F('LiveBrokers', A(S(
            F('Id', INT32, '0+'),
            F('V0Host', STRING, '0'),
            F('V0Port', INT32, '0'),
            F('Endpoints', A(S(
                F('Port', INT32, '1+'),
                F('Host', STRING, '1+'),
                F('Listener', STRING, '3+'),
                F('SecurityProtocol', INT16, '1+'),
              )), '1+'),
            F('Rack', STRING, '2+', nullable='0+'),
          )), '0+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
    ],
)

CONTROLLED_SHUTDOWN = api(
    ApiKey.CONTROLLED_SHUTDOWN, 'ControlledShutdown', '0-3', '3+',
    request=[
        F('BrokerId', INT32, '0+'),
        F('BrokerEpoch', INT64, '2+', default=-1),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('RemainingPartitions', A(S(
            F('TopicName', STRING, '0+'),
            F('PartitionIndex', INT32, '0+'),
          )), '0+'),
    ],
)

OFFSET_COMMIT = api(
    # v9: the same fields; a KIP-848 member sends its member epoch in GenerationIdOrMemberEpoch
    ApiKey.OFFSET_COMMIT, 'OffsetCommit', '0-9', '8+',
    request=[
        F('GroupId', STRING, '0+'),
        F('GenerationIdOrMemberEpoch', INT32, '1+', default=-1),
        F('MemberId', STRING, '1+'),
        F('GroupInstanceId', STRING, '7+', nullable='7+', default=None),
        F('RetentionTimeMs', INT64, '2-4', default=-1),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('CommittedOffset', INT64, '0+'),
                F('CommittedLeaderEpoch', INT32, '6+', default=-1),
                F('CommitTimestamp', INT64, '1', default=-1),
                F('CommittedMetadata', STRING, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '3+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

OFFSET_FETCH = api(
    ApiKey.OFFSET_FETCH, 'OffsetFetch', '0-9', '6+',
    request=[
        F('GroupId', STRING, '0-7'),
        F('Topics', A(S(
            F('Name', STRING, '0-7'),
            F('PartitionIndexes', A(INT32), '0-7'),
          )), '0-7', nullable='2-7'),
        F('Groups', A(S(  # v8+: many groups in one request (the admin client batches them)
            F('GroupId', STRING, '8+'),
            F('MemberId', STRING, '9+', nullable='9+', default=None),  # KIP-848 members: checked
            F('MemberEpoch', INT32, '9+', default=-1),
            F('Topics', A(S(
                F('Name', STRING, '8+'),
                F('PartitionIndexes', A(INT32), '8+'),
              )), '8+', nullable='8+'),
          )), '8+'),
        F('RequireStable', BOOL, '7+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '3+'),
        F('Topics', A(S(
            F('Name', STRING, '0-7'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0-7'),
                F('CommittedOffset', INT64, '0-7'),
                F('CommittedLeaderEpoch', INT32, '5-7', default=-1),
                F('Metadata', STRING, '0-7', nullable='0-7'),
                F('ErrorCode', INT16, '0-7'),
              )), '0-7'),
          )), '0-7'),
        F('ErrorCode', INT16, '2-7'),
        F('Groups', A(S(
            F('GroupId', STRING, '8+'),
            F('Topics', A(S(
                F('Name', STRING, '8+'),
                F('Partitions', A(S(
                    F('PartitionIndex', INT32, '8+'),
                    F('CommittedOffset', INT64, '8+'),
                    F('CommittedLeaderEpoch', INT32, '8+', default=-1),
                    F('Metadata', STRING, '8+', nullable='8+'),
                    F('ErrorCode', INT16, '8+'),
                  )), '8+'),
              )), '8+'),
            F('ErrorCode', INT16, '8+'),
          )), '8+'),
    ],
)

FIND_COORDINATOR = api(
    ApiKey.FIND_COORDINATOR, 'FindCoordinator', '0-4', '3+',
    request=[
        F('Key', STRING, '0-3'),
        F('KeyType', INT8, '1+'),
        F('CoordinatorKeys', A(STRING), '4+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0-3'),
        F('ErrorMessage', STRING, '1-3', nullable='1-3'),
        F('NodeId', INT32, '0-3'),
        F('Host', STRING, '0-3'),
        F('Port', INT32, '0-3'),
        F('Coordinators', A(S(
            F('Key', STRING, '4+'),
            F('NodeId', INT32, '4+'),
            F('Host', STRING, '4+'),
            F('Port', INT32, '4+'),
            F('ErrorCode', INT16, '4+'),
            F('ErrorMessage', STRING, '4+', nullable='4+'),
          )), '4+'),
    ],
)

JOIN_GROUP = api(
    ApiKey.JOIN_GROUP, 'JoinGroup', '0-7', '6+',
    request=[
        F('GroupId', STRING, '0+'),
        F('SessionTimeoutMs', INT32, '0+'),
        F('RebalanceTimeoutMs', INT32, '1+', default=-1),
        F('MemberId', STRING, '0+'),
        F('GroupInstanceId', STRING, '5+', nullable='5+', default=None),
        F('ProtocolType', STRING, '0+'),
        F('Protocols', A(S(
            F('Name', STRING, '0+'),
            F('Metadata', BYTES, '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '2+'),
        F('ErrorCode', INT16, '0+'),
        F('GenerationId', INT32, '0+', default=-1),
        F('ProtocolType', STRING, '7+', nullable='7+', default=None),
        F('ProtocolName', STRING, '0+', nullable='7+'),
        F('Leader', STRING, '0+'),
        F('MemberId', STRING, '0+'),
        F('Members', A(S(
            F('MemberId', STRING, '0+'),
            F('GroupInstanceId', STRING, '5+', nullable='5+', default=None),
            F('Metadata', BYTES, '0+'),
          )), '0+'),
    ],
)

HEARTBEAT = api(
    ApiKey.HEARTBEAT, 'Heartbeat', '0-4', '4+',
    request=[
        F('GroupId', STRING, '0+'),
        F('GenerationId', INT32, '0+'),
        F('MemberId', STRING, '0+'),
        F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0+'),
    ],
)

LEAVE_GROUP = api(
    ApiKey.LEAVE_GROUP, 'LeaveGroup', '0-4', '4+',
    request=[
        F('GroupId', STRING, '0+'),
        F('MemberId', STRING, '0-2'),
        F('Members', A(S(
            F('MemberId', STRING, '3+'),
            F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
          )), '3+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0+'),
        F('Members', A(S(
            F('MemberId', STRING, '3+'),
            F('GroupInstanceId', STRING, '3+', nullable='3+'),
            F('ErrorCode', INT16, '3+'),
          )), '3+'),
    ],
)

SYNC_GROUP = api(
    ApiKey.SYNC_GROUP, 'SyncGroup', '0-5', '4+',
    request=[
        F('GroupId', STRING, '0+'),
        F('GenerationId', INT32, '0+'),
        F('MemberId', STRING, '0+'),
        F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
        F('ProtocolType', STRING, '5+', nullable='5+', default=None),
        F('ProtocolName', STRING, '5+', nullable='5+', default=None),
        F('Assignments', A(S(
            F('MemberId', STRING, '0+'),
            F('Assignment', BYTES, '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0+'),
        F('ProtocolType', STRING, '5+', nullable='5+', default=None),
        F('ProtocolName', STRING, '5+', nullable='5+', default=None),
        F('Assignment', BYTES, '0+'),
    ],
)

DESCRIBE_GROUPS = api(
    ApiKey.DESCRIBE_GROUPS, 'DescribeGroups', '0-5', '5+',
    request=[
        F('Groups', A(STRING), '0+'),
        F('IncludeAuthorizedOperations', BOOL, '3+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '1+'),
        F('Groups', A(S(
            F('ErrorCode', INT16, '0+'),
            F('GroupId', STRING, '0+'),
            F('GroupState', STRING, '0+'),
            F('ProtocolType', STRING, '0+'),
            F('ProtocolData', STRING, '0+'),
            F('Members', A(S(
                F('MemberId', STRING, '0+'),
                F('GroupInstanceId', STRING, '4+', nullable='4+', default=None),
                F('ClientId', STRING, '0+'),
                F('ClientHost', STRING, '0+'),
                F('MemberMetadata', BYTES, '0+'),
                F('MemberAssignment', BYTES, '0+'),
              )), '0+'),
            F('AuthorizedOperations', INT32, '3+', default=-2147483648),
          )), '0+'),
    ],
)

LIST_GROUPS = api(
    ApiKey.LIST_GROUPS, 'ListGroups', '0-5', '3+',
    request=[
        F('StatesFilter', A(STRING), '4+'),
        F('TypesFilter', A(STRING), '5+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '1+'),
        F('ErrorCode', INT16, '0+'),
        F('Groups', A(S(
            F('GroupId', STRING, '0+'),
            F('ProtocolType', STRING, '0+'),
            F('GroupState', STRING, '4+'),
            F('GroupType', STRING, '5+'),
          )), '0+'),
    ],
)

DELETE_RECORDS = api(
    ApiKey.DELETE_RECORDS, 'DeleteRecords', '0-2', '2+',
    request=[
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('Offset', INT64, '0+'),
              )), '0+'),
          )), '0+'),
        F('TimeoutMs', INT32, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('LowWatermark', INT64, '0+'),
                F('ErrorCode', INT16, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

ALTER_REPLICA_LOG_DIRS = api(
    ApiKey.ALTER_REPLICA_LOG_DIRS, 'AlterReplicaLogDirs', '1-2', '2+',
    request=[
        F('Dirs', A(S(
            F('Path', STRING, '0+'),
            F('Topics', A(S(
                F('Name', STRING, '0+'),
                F('Partitions', A(INT32), '0+'),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', A(S(
            F('TopicName', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

DESCRIBE_LOG_DIRS = api(
    ApiKey.DESCRIBE_LOG_DIRS, 'DescribeLogDirs', '1-4', '2+',
    request=[
        F('Topics', A(S(
            F('Topic', STRING, '0+'),
            F('Partitions', A(INT32), '0+'),
          )), '0+', nullable='0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '3+'),
        F('Results', A(S(
            F('ErrorCode', INT16, '0+'),
            F('LogDir', STRING, '0+'),
            F('Topics', A(S(
                F('Name', STRING, '0+'),
                F('Partitions', A(S(
                    F('PartitionIndex', INT32, '0+'),
                    F('PartitionSize', INT64, '0+'),
                    F('OffsetLag', INT64, '0+'),
                    F('IsFutureKey', BOOL, '0+'),
                  )), '0+'),
              )), '0+'),
            F('TotalBytes', INT64, '4+', default=-1),
            F('UsableBytes', INT64, '4+', default=-1),
          )), '0+'),
    ],
)

DESCRIBE_PRODUCERS = api(
    ApiKey.DESCRIBE_PRODUCERS, 'DescribeProducers', '0', '0+',
    request=[
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('PartitionIndexes', A(INT32), '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
                F('ActiveProducers', A(S(
                    F('ProducerId', INT64, '0+'),
                    F('ProducerEpoch', INT32, '0+'),
                    F('LastSequence', INT32, '0+', default=-1),
                    F('LastTimestamp', INT64, '0+', default=-1),
                    F('CoordinatorEpoch', INT32, '0+'),
                    F('CurrentTxnStartOffset', INT64, '0+', default=-1),
                  )), '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

WRITE_TXN_MARKERS = api(
    ApiKey.WRITE_TXN_MARKERS, 'WriteTxnMarkers', '0-1', '1+',
    request=[
        F('Markers', A(S(
            F('ProducerId', INT64, '0+'),
            F('ProducerEpoch', INT16, '0+'),
            F('TransactionResult', BOOL, '0+'),
            F('Topics', A(S(
                F('Name', STRING, '0+'),
                F('PartitionIndexes', A(INT32), '0+'),
              )), '0+'),
            F('CoordinatorEpoch', INT32, '0+'),
          )), '0+'),
    ],
    response=[
        F('Markers', A(S(
            F('ProducerId', INT64, '0+'),
            F('Topics', A(S(
                F('Name', STRING, '0+'),
                F('Partitions', A(S(
                    F('PartitionIndex', INT32, '0+'),
                    F('ErrorCode', INT16, '0+'),
                  )), '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

_TXN_TOPICS = A(S(
    F('Name', STRING, '0+'),
    F('Partitions', A(INT32), '0+'),
  ))

_TXN_RESULTS = A(S(
    F('Name', STRING, '0+'),
    F('ResultsByPartition', A(S(
        F('PartitionIndex', INT32, '0+'),
        F('PartitionErrorCode', INT16, '0+'),
      )), '0+'),
  ))

ADD_PARTITIONS_TO_TXN = api(
    ApiKey.ADD_PARTITIONS_TO_TXN, 'AddPartitionsToTxn', '0-4', '3+',
    request=[
        F('Transactions', A(S(
            F('TransactionalId', STRING, '4+'),
            F('ProducerId', INT64, '4+'),
            F('ProducerEpoch', INT16, '4+'),
            F('VerifyOnly', BOOL, '4+', default=False),
            F('Topics', _TXN_TOPICS, '4+'),
          )), '4+'),
        F('V3AndBelowTransactionalId', STRING, '0-3'),
        F('V3AndBelowProducerId', INT64, '0-3'),
        F('V3AndBelowProducerEpoch', INT16, '0-3'),
        F('V3AndBelowTopics', _TXN_TOPICS, '0-3'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '4+'),
        F('ResultsByTransaction', A(S(
            F('TransactionalId', STRING, '4+'),
            F('TopicResults', _TXN_RESULTS, '4+'),
          )), '4+'),
        F('ResultsByTopicV3AndBelow', _TXN_RESULTS, '0-3'),
    ],
)

ADD_OFFSETS_TO_TXN = api(
    ApiKey.ADD_OFFSETS_TO_TXN, 'AddOffsetsToTxn', '0-3', '3+',
    request=[
        F('TransactionalId', STRING, '0+'),
        F('ProducerId', INT64, '0+'),
        F('ProducerEpoch', INT16, '0+'),
        F('GroupId', STRING, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
    ],
)

END_TXN = api(
    ApiKey.END_TXN, 'EndTxn', '0-3', '3+',
    request=[
        F('TransactionalId', STRING, '0+'),
        F('ProducerId', INT64, '0+'),
        F('ProducerEpoch', INT16, '0+'),
        F('Committed', BOOL, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
    ],
)

TXN_OFFSET_COMMIT = api(
    ApiKey.TXN_OFFSET_COMMIT, 'TxnOffsetCommit', '0-3', '3+',
    request=[
        F('TransactionalId', STRING, '0+'),
        F('GroupId', STRING, '0+'),
        F('ProducerId', INT64, '0+'),
        F('ProducerEpoch', INT16, '0+'),
        F('GenerationId', INT32, '3+', default=-1),
        F('MemberId', STRING, '3+', default=''),
        F('GroupInstanceId', STRING, '3+', nullable='3+', default=None),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('CommittedOffset', INT64, '0+'),
                F('CommittedLeaderEpoch', INT32, '2+', default=-1),
                F('CommittedMetadata', STRING, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

DESCRIBE_TRANSACTIONS = api(
    ApiKey.DESCRIBE_TRANSACTIONS, 'DescribeTransactions', '0', '0+',
    request=[
        F('TransactionalIds', A(STRING), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('TransactionStates', A(S(
            F('ErrorCode', INT16, '0+'),
            F('TransactionalId', STRING, '0+'),
            F('TransactionState', STRING, '0+'),
            F('TransactionTimeoutMs', INT32, '0+'),
            F('TransactionStartTimeMs', INT64, '0+'),
            F('ProducerId', INT64, '0+'),
            F('ProducerEpoch', INT16, '0+'),
            F('Topics', A(S(
                F('Topic', STRING, '0+'),
                F('Partitions', A(INT32), '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

LIST_TRANSACTIONS = api(
    ApiKey.LIST_TRANSACTIONS, 'ListTransactions', '0-1', '0+',
    request=[
        F('StateFilters', A(STRING), '0+'),
        F('ProducerIdFilters', A(INT64), '0+'),
        F('DurationFilter', INT64, '1+', default=-1),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('UnknownStateFilters', A(STRING), '0+'),
        F('TransactionStates', A(S(
            F('TransactionalId', STRING, '0+'),
            F('ProducerId', INT64, '0+'),
            F('TransactionState', STRING, '0+'),
          )), '0+'),
    ],
)

SASL_HANDSHAKE = api(
    # v0 is listed as Kafka lists it (librdkafka turns SASL on only if it is), but a v0
    # handshake (raw SASL tokens after it, pre-1.0 clients) is refused: network.py.
    ApiKey.SASL_HANDSHAKE, 'SaslHandshake', '0-1', None,
    request=[
        F('Mechanism', STRING, '0+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('Mechanisms', A(STRING), '0+'),
    ],
)

SASL_AUTHENTICATE = api(
    ApiKey.SASL_AUTHENTICATE, 'SaslAuthenticate', '0-2', '2+',
    request=[
        F('AuthBytes', BYTES, '0+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+'),
        F('AuthBytes', BYTES, '0+'),
        F('SessionLifetimeMs', INT64, '1+', default=0),
    ],
)

DESCRIBE_USER_SCRAM_CREDENTIALS = api(
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 'DescribeUserScramCredentials', '0', '0+',
    request=[
        F('Users', A(S(
            F('Name', STRING, '0+'),
          )), '0+', nullable='0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+'),
        F('Results', A(S(
            F('User', STRING, '0+'),
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+'),
            F('CredentialInfos', A(S(
                F('Mechanism', INT8, '0+'),
                F('Iterations', INT32, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

ALTER_USER_SCRAM_CREDENTIALS = api(
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 'AlterUserScramCredentials', '0', '0+',
    request=[
        F('Deletions', A(S(
            F('Name', STRING, '0+'),
            F('Mechanism', INT8, '0+'),
          )), '0+'),
        F('Upsertions', A(S(
            F('Name', STRING, '0+'),
            F('Mechanism', INT8, '0+'),
            F('Iterations', INT32, '0+'),
            F('Salt', BYTES, '0+'),
            F('SaltedPassword', BYTES, '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', A(S(
            F('User', STRING, '0+'),
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+'),
          )), '0+'),
    ],
)

_QUOTA_ENTITY = A(S(
    F('EntityType', STRING, '0+'),
    F('EntityName', STRING, '0+', nullable='0+'),
))

DESCRIBE_CLIENT_QUOTAS = api(
    ApiKey.DESCRIBE_CLIENT_QUOTAS, 'DescribeClientQuotas', '0-1', '1+',
    request=[
        F('Components', A(S(
            F('EntityType', STRING, '0+'),
            F('MatchType', INT8, '0+'),
            F('Match', STRING, '0+', nullable='0+'),
          )), '0+'),
        F('Strict', BOOL, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+'),
        F('Entries', A(S(
            F('Entity', _QUOTA_ENTITY, '0+'),
            F('Values', A(S(
                F('Key', STRING, '0+'),
                F('Value', FLOAT64, '0+'),
              )), '0+'),
          )), '0+', nullable='0+'),
    ],
)

ALTER_CLIENT_QUOTAS = api(
    ApiKey.ALTER_CLIENT_QUOTAS, 'AlterClientQuotas', '0-1', '1+',
    request=[
        F('Entries', A(S(
            F('Entity', _QUOTA_ENTITY, '0+'),
            F('Ops', A(S(
                F('Key', STRING, '0+'),
                F('Value', FLOAT64, '0+'),
                F('Remove', BOOL, '0+'),
              )), '0+'),
          )), '0+'),
        F('ValidateOnly', BOOL, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Entries', A(S(
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+'),
            F('Entity', _QUOTA_ENTITY, '0+'),
          )), '0+'),
    ],
)

_PRINCIPALS = A(S(
    F('PrincipalType', STRING, '0+'),
    F('PrincipalName', STRING, '0+'),
))

# Delegation tokens (KIP-48; KIP-373's owner fields at v3). Kafka 4.0 serves from v1 (KIP-896).
CREATE_DELEGATION_TOKEN = api(
    ApiKey.CREATE_DELEGATION_TOKEN, 'CreateDelegationToken', '1-3', '2+',
    request=[
        F('OwnerPrincipalType', STRING, '3+', nullable='3+'),
        F('OwnerPrincipalName', STRING, '3+', nullable='3+'),
        F('Renewers', _PRINCIPALS, '0+'),
        F('MaxLifetimeMs', INT64, '0+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('PrincipalType', STRING, '0+'),
        F('PrincipalName', STRING, '0+'),
        F('TokenRequesterPrincipalType', STRING, '3+'),
        F('TokenRequesterPrincipalName', STRING, '3+'),
        F('IssueTimestampMs', INT64, '0+'),
        F('ExpiryTimestampMs', INT64, '0+'),
        F('MaxTimestampMs', INT64, '0+'),
        F('TokenId', STRING, '0+'),
        F('Hmac', BYTES, '0+'),
        F('ThrottleTimeMs', INT32, '0+'),
    ],
)

_TOKEN_TIME_RESPONSE = [
    F('ErrorCode', INT16, '0+'),
    F('ExpiryTimestampMs', INT64, '0+'),
    F('ThrottleTimeMs', INT32, '0+'),
]

RENEW_DELEGATION_TOKEN = api(
    ApiKey.RENEW_DELEGATION_TOKEN, 'RenewDelegationToken', '1-2', '2+',
    request=[
        F('Hmac', BYTES, '0+'),
        F('RenewPeriodMs', INT64, '0+'),
    ],
    response=_TOKEN_TIME_RESPONSE,
)

EXPIRE_DELEGATION_TOKEN = api(
    ApiKey.EXPIRE_DELEGATION_TOKEN, 'ExpireDelegationToken', '1-2', '2+',
    request=[
        F('Hmac', BYTES, '0+'),
        F('ExpiryTimePeriodMs', INT64, '0+'),
    ],
    response=_TOKEN_TIME_RESPONSE,
)

DESCRIBE_DELEGATION_TOKEN = api(
    ApiKey.DESCRIBE_DELEGATION_TOKEN, 'DescribeDelegationToken', '1-3', '2+',
    request=[
        F('Owners', _PRINCIPALS, '0+', nullable='0+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('Tokens', A(S(
            F('PrincipalType', STRING, '0+'),
            F('PrincipalName', STRING, '0+'),
            F('TokenRequesterPrincipalType', STRING, '3+'),
            F('TokenRequesterPrincipalName', STRING, '3+'),
            F('IssueTimestamp', INT64, '0+'),
            F('ExpiryTimestamp', INT64, '0+'),
            F('MaxTimestamp', INT64, '0+'),
            F('TokenId', STRING, '0+'),
            F('Hmac', BYTES, '0+'),
            F('Renewers', _PRINCIPALS, '0+'),
          )), '0+'),
        F('ThrottleTimeMs', INT32, '0+'),
    ],
)

OFFSET_DELETE = api(
    ApiKey.OFFSET_DELETE, 'OffsetDelete', '0', 'none',
    request=[
        F('GroupId', STRING, '0+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('ThrottleTimeMs', INT32, '0+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

DELETE_GROUPS = api(
    ApiKey.DELETE_GROUPS, 'DeleteGroups', '0-2', '2+',
    request=[
        F('GroupsNames', A(STRING), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', A(S(
            F('GroupId', STRING, '0+'),
            F('ErrorCode', INT16, '0+'),
          )), '0+'),
    ],
)

API_VERSIONS = api(
    ApiKey.API_VERSIONS, 'ApiVersions', '0-3', '3+',
    request=[
        F('ClientSoftwareName', STRING, '3+'),
        F('ClientSoftwareVersion', STRING, '3+'),
    ],
    response=[
        F('ErrorCode', INT16, '0+'),
        F('ApiKeys', A(S(
            F('ApiKey', INT16, '0+'),
            F('MinVersion', INT16, '0+'),
            F('MaxVersion', INT16, '0+'),
          )), '0+'),
        F('ThrottleTimeMs', INT32, '1+'),
        F('SupportedFeatures', A(S(
            F('Name', STRING, '3+'),
            F('MinVersion', INT16, '3+'),
            F('MaxVersion', INT16, '3+'),
          )), '3+', tagged='3+', tag=0),
        F('FinalizedFeaturesEpoch', INT64, '3+', tagged='3+', tag=1, default=-1),
        F('FinalizedFeatures', A(S(
            F('Name', STRING, '3+'),
            F('MaxVersionLevel', INT16, '3+'),
            F('MinVersionLevel', INT16, '3+'),
          )), '3+', tagged='3+', tag=2),
        F('ZkMigrationReady', BOOL, '3+', tagged='3+', tag=3),
    ],
)

CREATE_TOPICS = api(
    ApiKey.CREATE_TOPICS, 'CreateTopics', '0-7', '5+',
    request=[
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('NumPartitions', INT32, '0+'),
            F('ReplicationFactor', INT16, '0+'),
            F('Assignments', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('BrokerIds', A(INT32), '0+'),
              )), '0+'),
            F('Configs', A(S(
                F('Name', STRING, '0+'),
                F('Value', STRING, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
        F('timeoutMs', INT32, '0+', default=60000),
        F('validateOnly', BOOL, '1+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '2+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('TopicId', UUID, '7+'),
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '1+', nullable='0+'),
            F('TopicConfigErrorCode', INT16, '5+', tagged='5+', tag=0),
            F('NumPartitions', INT32, '5+', default=-1),
            F('ReplicationFactor', INT16, '5+', default=-1),
            F('Configs', A(S(
                F('Name', STRING, '5+'),
                F('Value', STRING, '5+', nullable='5+'),
                F('ReadOnly', BOOL, '5+'),
                F('ConfigSource', INT8, '5+', default=-1),
                F('IsSensitive', BOOL, '5+'),
              )), '5+', nullable='5+'),
          )), '0+'),
    ],
)

DELETE_TOPICS = api(
    ApiKey.DELETE_TOPICS, 'DeleteTopics', '0-6', '4+',
    request=[
        F('Topics', A(S(
            F('Name', STRING, '6+', nullable='6+', default=None),
            F('TopicId', UUID, '6+'),
          )), '6+'),
        F('TopicNames', A(STRING), '0-5'),
        F('TimeoutMs', INT32, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '1+'),
        F('Responses', A(S(
            F('Name', STRING, '0+', nullable='6+'),
            F('TopicId', UUID, '6+'),
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '5+', nullable='5+', default=None),
          )), '0+'),
    ],
)

INIT_PRODUCER_ID = api(
    ApiKey.INIT_PRODUCER_ID, 'InitProducerId', '0-4', '2+',
    request=[
        F('TransactionalId', STRING, '0+', nullable='0+'),
        F('TransactionTimeoutMs', INT32, '0+'),
        F('ProducerId', INT64, '3+', default=-1),
        F('ProducerEpoch', INT16, '3+', default=-1),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ProducerId', INT64, '0+', default=-1),
        F('ProducerEpoch', INT16, '0+'),
    ],
)

OFFSET_FOR_LEADER_EPOCH = api(
    ApiKey.OFFSET_FOR_LEADER_EPOCH, 'OffsetForLeaderEpoch', '0-4', '4+',
    request=[
        F('ReplicaId', INT32, '3+', default=-2),
        F('Topics', A(S(
            F('Topic', STRING, '0+'),
            F('Partitions', A(S(
                F('Partition', INT32, '0+'),
                F('CurrentLeaderEpoch', INT32, '2+', default=-1),
                F('LeaderEpoch', INT32, '0+'),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '2+'),
        F('Topics', A(S(
            F('Topic', STRING, '0+'),
            F('Partitions', A(S(
                F('ErrorCode', INT16, '0+'),
                F('Partition', INT32, '0+'),
                F('LeaderEpoch', INT32, '1+', default=-1),
                F('EndOffset', INT64, '0+', default=-1),
              )), '0+'),
          )), '0+'),
    ],
)

DESCRIBE_CONFIGS = api(
    ApiKey.DESCRIBE_CONFIGS, 'DescribeConfigs', '0-4', '4+',
    request=[
        F('Resources', A(S(
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('ConfigurationKeys', A(STRING), '0+', nullable='0+'),
          )), '0+'),
        F('IncludeSynonyms', BOOL, '1+'),
        F('IncludeDocumentation', BOOL, '3+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', A(S(
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+'),
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('Configs', A(S(
                F('Name', STRING, '0+'),
                F('Value', STRING, '0+', nullable='0+'),
                F('ReadOnly', BOOL, '0+'),
                F('IsDefault', BOOL, '0'),
                F('ConfigSource', INT8, '1+', default=-1),
                F('IsSensitive', BOOL, '0+'),
                F('Synonyms', A(S(
                    F('Name', STRING, '1+'),
                    F('Value', STRING, '1+', nullable='0+'),
                    F('Source', INT8, '1+'),
                  )), '1+'),
                F('ConfigType', INT8, '3+'),
                F('Documentation', STRING, '3+', nullable='0+'),
              )), '0+'),
          )), '0+'),
    ],
)

ALTER_CONFIGS = api(
    ApiKey.ALTER_CONFIGS, 'AlterConfigs', '0-2', '2+',
    request=[
        F('Resources', A(S(
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('Configs', A(S(
                F('Name', STRING, '0+'),
                F('Value', STRING, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
        F('ValidateOnly', BOOL, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Responses', A(S(
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+'),
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
          )), '0+'),
    ],
)

CREATE_PARTITIONS = api(
    ApiKey.CREATE_PARTITIONS, 'CreatePartitions', '0-3', '2+',
    request=[
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Count', INT32, '0+'),
            F('Assignments', A(S(
                F('BrokerIds', A(INT32), '0+'),
              )), '0+', nullable='0+'),
          )), '0+'),
        F('TimeoutMs', INT32, '0+'),
        F('ValidateOnly', BOOL, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', A(S(
            F('Name', STRING, '0+'),
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
          )), '0+'),
    ],
)

ELECT_LEADERS = api(
    ApiKey.ELECT_LEADERS, 'ElectLeaders', '0-2', '2+',
    request=[
        F('ElectionType', INT8, '1+'),
        F('TopicPartitions', A(S(
            F('Topic', STRING, '0+'),
            F('Partitions', A(INT32), '0+'),
          )), '0+', nullable='0+'),
        F('TimeoutMs', INT32, '0+', default=60000),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '1+'),
        F('ReplicaElectionResults', A(S(
            F('Topic', STRING, '0+'),
            F('PartitionResult', A(S(
                F('PartitionId', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('ErrorMessage', STRING, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
    ],
)

INCREMENTAL_ALTER_CONFIGS = api(
    ApiKey.INCREMENTAL_ALTER_CONFIGS, 'IncrementalAlterConfigs', '0-1', '1+',
    request=[
        F('Resources', A(S(
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('Configs', A(S(
                F('Name', STRING, '0+'),
                F('ConfigOperation', INT8, '0+'),
                F('Value', STRING, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
        F('ValidateOnly', BOOL, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Responses', A(S(
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+'),
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
          )), '0+'),
    ],
)

ALTER_PARTITION_REASSIGNMENTS = api(
    ApiKey.ALTER_PARTITION_REASSIGNMENTS, 'AlterPartitionReassignments', '0', '0+',
    request=[
        F('TimeoutMs', INT32, '0+', default=60000),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('Replicas', A(INT32), '0+', nullable='0+', default=None),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+'),
        F('Responses', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('ErrorMessage', STRING, '0+', nullable='0+'),
              )), '0+'),
          )), '0+'),
    ],
)

LIST_PARTITION_REASSIGNMENTS = api(
    ApiKey.LIST_PARTITION_REASSIGNMENTS, 'ListPartitionReassignments', '0', '0+',
    request=[
        F('TimeoutMs', INT32, '0+', default=60000),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('PartitionIndexes', A(INT32), '0+'),
          )), '0+', nullable='0+', default=None),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+'),
        F('Topics', A(S(
            F('Name', STRING, '0+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('Replicas', A(INT32), '0+'),
                F('AddingReplicas', A(INT32), '0+'),
                F('RemovingReplicas', A(INT32), '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

ALTER_PARTITION = api(
    ApiKey.ALTER_PARTITION, 'AlterPartition', '0-3', '0+',
    request=[
        F('BrokerId', INT32, '0+'),
        F('BrokerEpoch', INT64, '0+', default=-1),
        F('Topics', A(S(
            F('TopicName', STRING, '0-1'),
            F('TopicId', UUID, '2+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('LeaderEpoch', INT32, '0+'),
                F('NewIsr', A(INT32), '0-2'),
                F('NewIsrWithEpochs', A(S(
                    F('BrokerId', INT32, '3+'),
                    F('BrokerEpoch', INT64, '3+', default=-1),
                  )), '3+'),
                F('LeaderRecoveryState', INT8, '1+'),
                F('PartitionEpoch', INT32, '0+'),
              )), '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('Topics', A(S(
            F('TopicName', STRING, '0-1'),
            F('TopicId', UUID, '2+'),
            F('Partitions', A(S(
                F('PartitionIndex', INT32, '0+'),
                F('ErrorCode', INT16, '0+'),
                F('LeaderId', INT32, '0+'),
                F('LeaderEpoch', INT32, '0+'),
                F('Isr', A(INT32), '0+'),
                F('LeaderRecoveryState', INT8, '1+'),
                F('PartitionEpoch', INT32, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

DESCRIBE_CLUSTER = api(
    ApiKey.DESCRIBE_CLUSTER, 'DescribeCluster', '0-1', '0+',
    request=[
        F('IncludeClusterAuthorizedOperations', BOOL, '0+'),
        F('EndpointType', INT8, '1+', default=1),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
        F('EndpointType', INT8, '1+', default=1),
        F('ClusterId', STRING, '0+'),
        F('ControllerId', INT32, '0+', default=-1),
        F('Brokers', A(S(
            F('BrokerId', INT32, '0+'),
            F('Host', STRING, '0+'),
            F('Port', INT32, '0+'),
            F('Rack', STRING, '0+', nullable='0+', default=None),
          )), '0+'),
        F('ClusterAuthorizedOperations', INT32, '0+', default=-2147483648),
    ],
)

# ACLs (kafka-acls.sh). Without an authorizer Kafka answers SECURITY_DISABLED to all three.
_ACL_FILTER = (
    F('ResourceTypeFilter', INT8, '0+'),
    F('ResourceNameFilter', STRING, '0+', nullable='0+'),
    F('PatternTypeFilter', INT8, '1+', default=3),
    F('PrincipalFilter', STRING, '0+', nullable='0+'),
    F('HostFilter', STRING, '0+', nullable='0+'),
    F('Operation', INT8, '0+'),
    F('PermissionType', INT8, '0+'),
)

DESCRIBE_ACLS = api(
    ApiKey.DESCRIBE_ACLS, 'DescribeAcls', '1-3', '2+',
    request=list(_ACL_FILTER),
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
        F('Resources', A(S(
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('PatternType', INT8, '1+', default=3),
            F('Acls', A(S(
                F('Principal', STRING, '0+'),
                F('Host', STRING, '0+'),
                F('Operation', INT8, '0+'),
                F('PermissionType', INT8, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

CREATE_ACLS = api(
    ApiKey.CREATE_ACLS, 'CreateAcls', '1-3', '2+',
    request=[
        F('Creations', A(S(
            F('ResourceType', INT8, '0+'),
            F('ResourceName', STRING, '0+'),
            F('ResourcePatternType', INT8, '1+', default=3),
            F('Principal', STRING, '0+'),
            F('Host', STRING, '0+'),
            F('Operation', INT8, '0+'),
            F('PermissionType', INT8, '0+'),
          )), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Results', A(S(
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
          )), '0+'),
    ],
)

DELETE_ACLS = api(
    ApiKey.DELETE_ACLS, 'DeleteAcls', '1-3', '2+',
    request=[
        F('Filters', A(S(*_ACL_FILTER)), '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('FilterResults', A(S(
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
            F('MatchingAcls', A(S(
                F('ErrorCode', INT16, '0+'),
                F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
                F('ResourceType', INT8, '0+'),
                F('ResourceName', STRING, '0+'),
                F('PatternType', INT8, '1+', default=3),
                F('Principal', STRING, '0+'),
                F('Host', STRING, '0+'),
                F('Operation', INT8, '0+'),
                F('PermissionType', INT8, '0+'),
              )), '0+'),
          )), '0+'),
    ],
)

CONSUMER_GROUP_HEARTBEAT = api(
    # KIP-848's consumer group protocol: the coordinator assigns (coordinator/consumer_group.py)
    ApiKey.CONSUMER_GROUP_HEARTBEAT, 'ConsumerGroupHeartbeat', '0-1', '0+',
    request=[
        F('GroupId', STRING, '0+'),
        F('MemberId', STRING, '0+'),
        F('MemberEpoch', INT32, '0+'),
        F('InstanceId', STRING, '0+', nullable='0+', default=None),
        F('RackId', STRING, '0+', nullable='0+', default=None),
        F('RebalanceTimeoutMs', INT32, '0+', default=-1),
        F('SubscribedTopicNames', A(STRING), '0+', nullable='0+', default=None),
        F('SubscribedTopicRegex', STRING, '1+', nullable='1+', default=None),
        F('ServerAssignor', STRING, '0+', nullable='0+', default=None),
        F('TopicPartitions', A(S(
            F('TopicId', UUID, '0+'),
            F('Partitions', A(INT32), '0+'),
          )), '0+', nullable='0+', default=None),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('ErrorCode', INT16, '0+'),
        F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
        F('MemberId', STRING, '0+', nullable='0+', default=None),
        F('MemberEpoch', INT32, '0+'),
        F('HeartbeatIntervalMs', INT32, '0+'),
        F('Assignment', S(
            F('TopicPartitions', A(S(
                F('TopicId', UUID, '0+'),
                F('Partitions', A(INT32), '0+'),
              )), '0+'),
          ), '0+', nullable='0+', default=None),
    ],
)

_DESCRIBED_ASSIGNMENT = S(
    F('TopicPartitions', A(S(
        F('TopicId', UUID, '0+'),
        F('TopicName', STRING, '0+'),
        F('Partitions', A(INT32), '0+'),
      )), '0+'),
)

CONSUMER_GROUP_DESCRIBE = api(
    ApiKey.CONSUMER_GROUP_DESCRIBE, 'ConsumerGroupDescribe', '0', '0+',
    request=[
        F('GroupIds', A(STRING), '0+'),
        F('IncludeAuthorizedOperations', BOOL, '0+'),
    ],
    response=[
        F('ThrottleTimeMs', INT32, '0+'),
        F('Groups', A(S(
            F('ErrorCode', INT16, '0+'),
            F('ErrorMessage', STRING, '0+', nullable='0+', default=None),
            F('GroupId', STRING, '0+'),
            F('GroupState', STRING, '0+'),
            F('GroupEpoch', INT32, '0+'),
            F('AssignmentEpoch', INT32, '0+'),
            F('AssignorName', STRING, '0+'),
            F('Members', A(S(
                F('MemberId', STRING, '0+'),
                F('InstanceId', STRING, '0+', nullable='0+', default=None),
                F('RackId', STRING, '0+', nullable='0+', default=None),
                F('MemberEpoch', INT32, '0+'),
                F('ClientId', STRING, '0+'),
                F('ClientHost', STRING, '0+'),
                F('SubscribedTopicNames', A(STRING), '0+'),
                F('SubscribedTopicRegex', STRING, '0+', nullable='0+', default=None),
                F('Assignment', _DESCRIBED_ASSIGNMENT, '0+'),
                F('TargetAssignment', _DESCRIBED_ASSIGNMENT, '0+'),
              )), '0+'),
            F('AuthorizedOperations', INT32, '0+', default=-2147483648),
          )), '0+'),
    ],
)

APIS: tuple[ApiSpec, ...] = (
    PRODUCE,
    DESCRIBE_ACLS,
    CREATE_ACLS,
    DELETE_ACLS,
    DELETE_GROUPS,
    OFFSET_DELETE,
    DELETE_RECORDS,
    ALTER_REPLICA_LOG_DIRS,
    DESCRIBE_LOG_DIRS,
    DESCRIBE_PRODUCERS,
    WRITE_TXN_MARKERS,
    ADD_PARTITIONS_TO_TXN,
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    TXN_OFFSET_COMMIT,
    DESCRIBE_TRANSACTIONS,
    LIST_TRANSACTIONS,
    CONSUMER_GROUP_HEARTBEAT,
    CONSUMER_GROUP_DESCRIBE,
    SASL_HANDSHAKE,
    SASL_AUTHENTICATE,
    DESCRIBE_USER_SCRAM_CREDENTIALS,
    ALTER_USER_SCRAM_CREDENTIALS,
    DESCRIBE_CLIENT_QUOTAS,
    ALTER_CLIENT_QUOTAS,
    CREATE_DELEGATION_TOKEN,
    RENEW_DELEGATION_TOKEN,
    EXPIRE_DELEGATION_TOKEN,
    DESCRIBE_DELEGATION_TOKEN,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    LEADER_AND_ISR,
    STOP_REPLICA,
    UPDATE_METADATA,
    CONTROLLED_SHUTDOWN,
    OFFSET_COMMIT,
    OFFSET_FETCH,
    FIND_COORDINATOR,
    JOIN_GROUP,
    HEARTBEAT,
    LEAVE_GROUP,
    SYNC_GROUP,
    DESCRIBE_GROUPS,
    LIST_GROUPS,
    API_VERSIONS,
    CREATE_TOPICS,
    DELETE_TOPICS,
    INIT_PRODUCER_ID,
    OFFSET_FOR_LEADER_EPOCH,
    DESCRIBE_CONFIGS,
    ALTER_CONFIGS,
    CREATE_PARTITIONS,
    ELECT_LEADERS,
    INCREMENTAL_ALTER_CONFIGS,
    ALTER_PARTITION_REASSIGNMENTS,
    LIST_PARTITION_REASSIGNMENTS,
    ALTER_PARTITION,
    DESCRIBE_CLUSTER,
)
