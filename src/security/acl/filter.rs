//! Kafka's `AclBindingFilter` (DescribeAcls, DeleteAcls): a pattern filter
//! (resource type or ANY, name or any, pattern type or ANY or MATCH) and an
//! entry filter (principal, host or any; operation, permission or ANY).

use super::binding::{AclBinding, Operation, PatternType, Permission, ResourceType};

/// Kafka's ANY code for every filterable enum; MATCH for pattern types.
const ANY: i8 = 1;
const MATCH: i8 = 2;

#[derive(Debug, Clone, PartialEq, Eq)]
enum PatternFilter {
    Any,
    Match,
    Exactly(PatternType),
}

/// A decoded filter.
#[derive(Debug, Clone)]
pub struct AclFilter {
    resource_type: Option<ResourceType>,
    resource_name: Option<String>,
    pattern: PatternFilter,
    principal: Option<String>,
    host: Option<String>,
    operation: Option<Operation>,
    permission: Option<Permission>,
}

impl AclFilter {
    /// Builds a filter from its wire codes; `Err` names what Kafka would
    /// call an invalid filter (UNKNOWN or out-of-range codes).
    #[allow(clippy::too_many_arguments)]
    pub fn from_wire(
        resource_type: i8,
        resource_name: Option<String>,
        pattern_type: i8,
        principal: Option<String>,
        host: Option<String>,
        operation: i8,
        permission: i8,
    ) -> Result<Option<AclFilter>, String> {
        let resource_type = match resource_type {
            ANY => None,
            code => Some(ResourceType::from_code(code).ok_or_else(|| format!("invalid resource type {code}"))?),
        };
        let pattern = match pattern_type {
            ANY => PatternFilter::Any,
            MATCH => PatternFilter::Match,
            code => PatternFilter::Exactly(
                PatternType::from_code(code).ok_or_else(|| format!("invalid pattern type {code}"))?,
            ),
        };
        let operation = match operation {
            ANY => None,
            code => Some(Operation::from_code(code).ok_or_else(|| format!("invalid operation {code}"))?),
        };
        let permission = match permission {
            ANY => None,
            code => Some(Permission::from_code(code).ok_or_else(|| format!("invalid permission type {code}"))?),
        };
        Ok(Some(AclFilter { resource_type, resource_name, pattern, principal, host, operation, permission }))
    }

    /// Kafka's `AclBindingFilter.matches`.
    pub fn matches(&self, acl: &AclBinding) -> bool {
        self.pattern_matches(acl)
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && self.operation.is_none_or(|o| o == acl.operation)
            && self.permission.is_none_or(|p| p == acl.permission_type)
    }

    fn pattern_matches(&self, acl: &AclBinding) -> bool {
        if self.resource_type.is_some_and(|rt| rt != acl.resource_type) {
            return false;
        }
        if let PatternFilter::Exactly(pt) = self.pattern {
            if pt != acl.pattern_type {
                return false;
            }
        }
        let Some(name) = &self.resource_name else { return true };
        match self.pattern {
            PatternFilter::Any | PatternFilter::Exactly(_) => *name == acl.resource_name,
            PatternFilter::Match => match acl.pattern_type {
                PatternType::Literal => *name == acl.resource_name || acl.resource_name == "*",
                PatternType::Prefixed => name.starts_with(&acl.resource_name),
            },
        }
    }
}

/// An ACL from CreateAcls' wire codes, checked as Kafka's controller does.
pub fn binding_from_wire(
    resource_type: i8,
    resource_name: String,
    pattern_type: i8,
    principal: String,
    host: String,
    operation: i8,
    permission: i8,
) -> Result<AclBinding, String> {
    let acl = AclBinding {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or_else(|| format!("Invalid resourceType {resource_type}"))?,
        resource_name,
        pattern_type: PatternType::from_code(pattern_type)
            .ok_or_else(|| format!("Invalid patternType {pattern_type}"))?,
        principal,
        host,
        operation: Operation::from_code(operation).ok_or_else(|| format!("Invalid operation {operation}"))?,
        permission_type: Permission::from_code(permission)
            .ok_or_else(|| format!("Invalid permissionType {permission}"))?,
    };
    acl.validate()?;
    Ok(acl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(rt: ResourceType, name: &str, pt: PatternType) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: "User:bob".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission_type: Permission::Allow,
        }
    }

    #[test]
    fn match_filters_find_the_acls_that_apply_to_a_name_as_kafkas_resource_pattern_filter() {
        let f = AclFilter::from_wire(3, Some("orders-eu".into()), MATCH, None, None, ANY, ANY).unwrap().unwrap();
        assert!(f.matches(&acl(ResourceType::Group, "orders-eu", PatternType::Literal)));
        assert!(f.matches(&acl(ResourceType::Group, "*", PatternType::Literal)));
        assert!(f.matches(&acl(ResourceType::Group, "orders-", PatternType::Prefixed)));
        assert!(!f.matches(&acl(ResourceType::Group, "orders-", PatternType::Literal)));
        assert!(!f.matches(&acl(ResourceType::Topic, "orders-eu", PatternType::Literal)));
        let any = AclFilter::from_wire(ANY, None, ANY, Some("User:bob".into()), None, 3, 3).unwrap().unwrap();
        assert!(any.matches(&acl(ResourceType::Topic, "t", PatternType::Prefixed)));
        let exact = AclFilter::from_wire(ANY, Some("orders-".into()), 4, None, None, ANY, ANY).unwrap().unwrap();
        assert!(exact.matches(&acl(ResourceType::Group, "orders-", PatternType::Prefixed)));
        assert!(!exact.matches(&acl(ResourceType::Group, "orders-", PatternType::Literal)));
        assert!(AclFilter::from_wire(0, None, ANY, None, None, ANY, ANY).is_err());
    }
}
