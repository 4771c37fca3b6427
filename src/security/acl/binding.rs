//! What an ACL is: Kafka's `AclBinding` (a resource pattern and an access
//! control entry), with Kafka's enum names (as stored in the ACL file and
//! printed) and wire codes (`ResourceType`, `PatternType`, `AclOperation`,
//! `AclPermissionType` in `org.apache.kafka.common`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// Generates an enum with Kafka's names and codes, parsed case-insensitively
/// with or without underscores (`DescribeConfigs`, `DESCRIBE_CONFIGS`), as
/// kafka-acls.sh accepts them.
macro_rules! kafka_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $code:literal, $kafka:literal;)* }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name { $($variant),* }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self { $($name::$variant => $code),* }
            }

            pub fn from_code(code: i8) -> Option<$name> {
                match code { $($code => Some($name::$variant),)* _ => None }
            }

            /// Kafka's enum name (`DESCRIBE_CONFIGS`).
            pub fn kafka_name(self) -> &'static str {
                match self { $($name::$variant => $kafka),* }
            }

            pub fn parse(s: &str) -> Option<$name> {
                let squash = |x: &str| x.chars().filter(|c| *c != '_' && *c != '-').collect::<String>().to_ascii_lowercase();
                let want = squash(s);
                $name::ALL.iter().copied().find(|v| squash(v.kafka_name()) == want)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.kafka_name())
            }
        }
    };
}

kafka_enum!(
    /// The resource types kcoord authorizes.
    ResourceType {
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
);

kafka_enum!(
    /// How an ACL's resource name matches: the exact name (`*` matching
    /// every name), or every name that starts with it.
    PatternType {
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
);

kafka_enum!(
    /// Kafka's `AclOperation` (ANY and UNKNOWN are filters, not operations).
    Operation {
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
);

kafka_enum!(
    /// Kafka's `AclPermissionType`.
    Permission {
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
);

impl ResourceType {
    /// The operations Kafka reports in "authorized operations" for the type
    /// (`AclEntry.supportedOperations`).
    pub fn supported_operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[Read, Write, Create, Describe, Delete, Alter, DescribeConfigs, AlterConfigs],
            ResourceType::Group => &[Read, Describe, Delete],
            ResourceType::Cluster => {
                &[Create, ClusterAction, DescribeConfigs, AlterConfigs, IdempotentWrite, Alter, Describe]
            }
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
        }
    }

    /// The bit field of every operation the type supports: the "authorized
    /// operations" Kafka reports without an authorizer (Metadata's topics and
    /// cluster, DescribeGroups), and the most an authorizer can grant.
    pub fn all_operations(self) -> i32 {
        operation_bits(self.supported_operations().iter().copied())
    }
}

/// Kafka's encoding of a set of operations: bit `code` set for each one.
pub fn operation_bits(ops: impl Iterator<Item = Operation>) -> i32 {
    ops.fold(0, |bits, op| bits | (1 << op.code()))
}

impl Operation {
    /// Whether an ALLOW ACL for `self` allows `wanted`: the same operation,
    /// ALL, or an operation that implies it (DESCRIBE is implied by READ,
    /// WRITE, DELETE and ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS).
    pub fn allows(self, wanted: Operation) -> bool {
        use Operation::*;
        self == All
            || self == wanted
            || matches!((wanted, self), (Describe, Read | Write | Delete | Alter) | (DescribeConfigs, AlterConfigs))
    }

    /// Whether a DENY ACL for `self` denies `wanted`: the same operation or
    /// ALL (a DENY implies nothing).
    pub fn denies(self, wanted: Operation) -> bool {
        self == Operation::All || self == wanted
    }
}

/// One ACL: who may (or may not) do what on which resources.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `User:alice`, or `User:*` for every user.
    pub principal: String,
    /// An IP address as the connection reports it, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission_type: Permission,
}

impl AclBinding {
    /// The checks Kafka's controller makes before storing an ACL.
    pub fn validate(&self) -> Result<(), String> {
        check_principal(&self.principal)?;
        if self.resource_name.is_empty() {
            return Err("the resource name is empty".into());
        }
        if self.host.is_empty() {
            return Err("the host is empty (use * for every host)".into());
        }
        if self.resource_type == ResourceType::Cluster && self.resource_name != super::CLUSTER_NAME {
            return Err(format!("the CLUSTER resource is named {:?}", super::CLUSTER_NAME));
        }
        Ok(())
    }

    /// Whether the ACL applies to `principal` connecting from `host`. Hosts
    /// compare as addresses, so `::1` and Java's `0:0:0:0:0:0:0:1` match.
    pub fn applies_to(&self, principal: &str, host: &str) -> bool {
        (self.principal == principal || self.principal == WILDCARD_PRINCIPAL)
            && (self.host == "*" || self.host == host || same_address(&self.host, host))
    }
}

impl fmt::Display for AclBinding {
    /// Kafka's `ResourcePattern` and `AccessControlEntry` layout.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(resourceType={}, name={}, patternType={}) (principal={}, host={}, operation={}, permissionType={})",
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission_type
        )
    }
}

fn same_address(a: &str, b: &str) -> bool {
    match (a.parse::<std::net::IpAddr>(), b.parse::<std::net::IpAddr>()) {
        (Ok(a), Ok(b)) => a.to_canonical() == b.to_canonical(),
        _ => false,
    }
}

/// Every user, in an ACL's principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

/// A principal is `Type:name` (Kafka's `SecurityUtils.parseKafkaPrincipal`).
pub fn check_principal(p: &str) -> Result<(), String> {
    match p.split_once(':') {
        Some((t, n)) if !t.is_empty() && !n.is_empty() => Ok(()),
        _ => Err(format!("principal {p:?} is not of the form Type:name (e.g. User:alice)")),
    }
}
