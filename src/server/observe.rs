//! Request metrics: every request is counted and timed per API and version,
//! and every error code it carries (per partition or member where the API has
//! several) is counted per API and error name. A request that fails so badly
//! the connection is closed instead of answered is counted too, with an
//! error label naming why (see [`CloseReason`]): those are exactly the
//! requests an operator most needs to see.

use std::time::Duration;

use crate::coordinator::messages as m;
use crate::error_code::ErrorCode;
use crate::protocol::versions::ApiSupport;
use crate::topics::{admin, fetch, list_offsets, produce, producer_ids};

/// Records one request, answered or not (kept in stripes, not in the
/// recorder: see `observability::striped`).
pub fn request(api: &ApiSupport, version: i16, elapsed: Duration) {
    crate::observability::striped::request(api.key, api.name, version, elapsed);
}

/// Why a request got no answer and its connection was closed. The labels
/// are not Kafka error names (no error code reached the client); they start
/// with `closed_` so they cannot be mistaken for one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// The request (header or body) did not decode.
    Decode,
    /// The response could not be encoded at the requested version.
    Encode,
    /// The service that owns the API is gone (shutting down).
    Unavailable,
    /// Anything else a handler reported.
    Internal,
}

impl CloseReason {
    pub fn label(self) -> &'static str {
        match self {
            CloseReason::Decode => "closed_decode_error",
            CloseReason::Encode => "closed_encode_error",
            CloseReason::Unavailable => "closed_unavailable",
            CloseReason::Internal => "closed_internal_error",
        }
    }
}

/// Counts a request whose connection was closed instead of answered.
pub fn closed(api: &'static str, reason: CloseReason) {
    metrics::counter!("kcoord_request_errors_total", "api" => api, "error" => reason.label()).increment(1);
}

/// Counts the error codes in a response.
pub fn errors(api: &'static str, resp: &impl ErrorCodes) {
    resp.each_error(&mut |e| {
        if !e.is_none() {
            metrics::counter!("kcoord_request_errors_total", "api" => api, "error" => e.name()).increment(1);
        }
    });
}

/// The error codes a response carries.
pub trait ErrorCodes {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode));
}

impl<T: ErrorCodes> ErrorCodes for Vec<T> {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.iter().for_each(|x| x.each_error(f));
    }
}

impl<T: ErrorCodes> ErrorCodes for std::sync::Arc<T> {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        T::each_error(self, f);
    }
}

impl<T: ErrorCodes> ErrorCodes for Option<T> {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        if let Some(x) = self {
            x.each_error(f);
        }
    }
}

macro_rules! single_error {
    ($($t:ty => $field:ident),* $(,)?) => {
        $(impl ErrorCodes for $t {
            fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
                f(self.$field);
            }
        })*
    };
}

single_error! {
    m::JoinGroupResponse => error,
    m::SyncGroupResponse => error,
    m::HeartbeatResponse => error,
    m::DescribedGroup => error,
    m::ListGroupsResponse => error,
    producer_ids::InitProducerIdResponse => error,
    admin::CreatedTopic => error,
    admin::DeletedTopic => error,
}

impl ErrorCodes for m::LeaveGroupResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        f(self.error);
        self.members.iter().for_each(|x| f(x.error));
    }
}

impl ErrorCodes for m::TopicErrors {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.partitions.iter().for_each(|p| f(p.error));
    }
}

impl ErrorCodes for m::OffsetCommitResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.topics.each_error(f);
    }
}

impl ErrorCodes for m::OffsetDeleteResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        f(self.error);
        self.topics.each_error(f);
    }
}

impl ErrorCodes for m::OffsetFetchResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        for g in &self.groups {
            f(g.error);
            g.topics.iter().flat_map(|t| t.partitions.iter()).for_each(|p| f(p.error));
        }
    }
}

impl ErrorCodes for m::DeleteGroupsResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.results.iter().for_each(|(_, e)| f(*e));
    }
}

impl ErrorCodes for produce::ProduceResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.topics.iter().flat_map(|t| t.partitions.iter()).for_each(|p| f(p.error));
    }
}

impl ErrorCodes for fetch::FetchResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        f(self.error);
        self.topics.iter().flat_map(|t| t.partitions.iter()).for_each(|p| f(p.error));
    }
}

impl ErrorCodes for list_offsets::ListOffsetsResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.topics.iter().flat_map(|t| t.partitions.iter()).for_each(|p| f(p.error));
    }
}

impl ErrorCodes for crate::cluster::CoordinatorAnswer {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        f(self.error);
    }
}

impl ErrorCodes for crate::cluster::MetadataResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.topics.iter().for_each(|t| f(t.error));
    }
}

impl ErrorCodes for crate::topics::create_partitions::CreatePartitionsResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.results.iter().for_each(|t| f(t.error));
    }
}

impl ErrorCodes for admin::CreateTopicsResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        self.topics.each_error(f);
    }
}

impl ErrorCodes for crate::coordinator::consumer::messages::ConsumerHeartbeatResponse {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        f(self.error);
    }
}

impl ErrorCodes for crate::coordinator::consumer::messages::DescribedConsumerGroup {
    fn each_error(&self, f: &mut dyn FnMut(ErrorCode)) {
        f(self.error);
    }
}
