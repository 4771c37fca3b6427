//! Kafka error codes as the coordinator uses them.
//!
//! A newtype rather than an enum: we only ever *produce* codes, and the wire
//! value is what matters. Names follow Kafka's `Errors` enum so logs, metrics
//! and tests read like Kafka's own.

use std::fmt;

#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ErrorCode(pub i16);

macro_rules! codes {
    ($($name:ident = $code:expr,)*) => {
        impl ErrorCode {
            $(pub const $name: ErrorCode = ErrorCode($code);)*

            /// Kafka's name for the code, e.g. `UNKNOWN_MEMBER_ID`.
            pub fn name(self) -> &'static str {
                match self.0 {
                    $($code => stringify!($name),)*
                    _ => "UNKNOWN",
                }
            }
        }
    };
}

codes! {
    UNKNOWN_SERVER_ERROR = -1,
    NONE = 0,
    OFFSET_OUT_OF_RANGE = 1,
    CORRUPT_MESSAGE = 2,
    UNKNOWN_TOPIC_OR_PARTITION = 3,
    INVALID_FETCH_SIZE = 4,
    LEADER_NOT_AVAILABLE = 5,
    NOT_LEADER_OR_FOLLOWER = 6,
    REQUEST_TIMED_OUT = 7,
    MESSAGE_TOO_LARGE = 10,
    OFFSET_METADATA_TOO_LARGE = 12,
    NETWORK_EXCEPTION = 13,
    COORDINATOR_LOAD_IN_PROGRESS = 14,
    COORDINATOR_NOT_AVAILABLE = 15,
    NOT_COORDINATOR = 16,
    INVALID_TOPIC_EXCEPTION = 17,
    RECORD_LIST_TOO_LARGE = 18,
    NOT_ENOUGH_REPLICAS = 19,
    INVALID_REQUIRED_ACKS = 21,
    ILLEGAL_GENERATION = 22,
    INCONSISTENT_GROUP_PROTOCOL = 23,
    INVALID_GROUP_ID = 24,
    UNKNOWN_MEMBER_ID = 25,
    INVALID_SESSION_TIMEOUT = 26,
    REBALANCE_IN_PROGRESS = 27,
    INVALID_COMMIT_OFFSET_SIZE = 28,
    TOPIC_AUTHORIZATION_FAILED = 29,
    GROUP_AUTHORIZATION_FAILED = 30,
    CLUSTER_AUTHORIZATION_FAILED = 31,
    INVALID_TIMESTAMP = 32,
    UNSUPPORTED_SASL_MECHANISM = 33,
    ILLEGAL_SASL_STATE = 34,
    UNSUPPORTED_VERSION = 35,
    TOPIC_ALREADY_EXISTS = 36,
    INVALID_PARTITIONS = 37,
    INVALID_REPLICATION_FACTOR = 38,
    INVALID_REPLICA_ASSIGNMENT = 39,
    INVALID_CONFIG = 40,
    INVALID_REQUEST = 42,
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43,
    POLICY_VIOLATION = 44,
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45,
    DUPLICATE_SEQUENCE_NUMBER = 46,
    INVALID_PRODUCER_EPOCH = 47,
    INVALID_TXN_STATE = 48,
    INVALID_PRODUCER_ID_MAPPING = 49,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53,
    SECURITY_DISABLED = 54,
    KAFKA_STORAGE_ERROR = 56,
    SASL_AUTHENTICATION_FAILED = 58,
    UNKNOWN_PRODUCER_ID = 59,
    DELEGATION_TOKEN_AUTH_DISABLED = 61,
    DELEGATION_TOKEN_NOT_FOUND = 62,
    DELEGATION_TOKEN_OWNER_MISMATCH = 63,
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64,
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65,
    DELEGATION_TOKEN_EXPIRED = 66,
    INVALID_PRINCIPAL_TYPE = 67,
    NON_EMPTY_GROUP = 68,
    GROUP_ID_NOT_FOUND = 69,
    FETCH_SESSION_ID_NOT_FOUND = 70,
    INVALID_FETCH_SESSION_EPOCH = 71,
    FENCED_LEADER_EPOCH = 74,
    UNKNOWN_LEADER_EPOCH = 75,
    UNSUPPORTED_COMPRESSION_TYPE = 76,
    INVALID_RECORD = 87,
    MEMBER_ID_REQUIRED = 79,
    GROUP_MAX_SIZE_REACHED = 81,
    FENCED_INSTANCE_ID = 82,
    GROUP_SUBSCRIBED_TO_TOPIC = 86,
    UNSTABLE_OFFSET_COMMIT = 88,
    PRODUCER_FENCED = 90,
    RESOURCE_NOT_FOUND = 91,
    DUPLICATE_RESOURCE = 92,
    UNACCEPTABLE_CREDENTIAL = 93,
    UNKNOWN_TOPIC_ID = 100,
    FENCED_MEMBER_EPOCH = 110,
    UNRELEASED_INSTANCE_ID = 111,
    UNSUPPORTED_ASSIGNOR = 112,
    STALE_MEMBER_EPOCH = 113,
    INVALID_REGULAR_EXPRESSION = 128,
}

impl ErrorCode {
    pub fn is_none(self) -> bool {
        self == ErrorCode::NONE
    }

    /// Kafka's mapping of errors raised by a coordinator write before they
    /// reach the wire (`CoordinatorOperationExceptionHelper`).
    pub fn for_coordinator_write(self) -> ErrorCode {
        match self {
            ErrorCode::UNKNOWN_TOPIC_OR_PARTITION | ErrorCode::NOT_ENOUGH_REPLICAS | ErrorCode::REQUEST_TIMED_OUT => {
                ErrorCode::COORDINATOR_NOT_AVAILABLE
            }
            ErrorCode::NOT_LEADER_OR_FOLLOWER | ErrorCode::KAFKA_STORAGE_ERROR => ErrorCode::NOT_COORDINATOR,
            ErrorCode::MESSAGE_TOO_LARGE | ErrorCode::RECORD_LIST_TOO_LARGE | ErrorCode::INVALID_FETCH_SIZE => {
                ErrorCode::UNKNOWN_SERVER_ERROR
            }
            ErrorCode::NETWORK_EXCEPTION => ErrorCode::COORDINATOR_LOAD_IN_PROGRESS,
            other => other,
        }
    }
}

impl fmt::Debug for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_kafka() {
        assert_eq!(ErrorCode::UNKNOWN_MEMBER_ID.name(), "UNKNOWN_MEMBER_ID");
        assert_eq!(ErrorCode(25), ErrorCode::UNKNOWN_MEMBER_ID);
        assert_eq!(format!("{:?}", ErrorCode::NONE), "NONE(0)");
    }

    #[test]
    fn storage_errors_map_like_kafkas_runtime() {
        assert_eq!(ErrorCode::KAFKA_STORAGE_ERROR.for_coordinator_write(), ErrorCode::NOT_COORDINATOR);
        assert_eq!(ErrorCode::MESSAGE_TOO_LARGE.for_coordinator_write(), ErrorCode::UNKNOWN_SERVER_ERROR);
        assert_eq!(ErrorCode::ILLEGAL_GENERATION.for_coordinator_write(), ErrorCode::ILLEGAL_GENERATION);
    }
}
