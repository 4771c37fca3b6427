//! The CSV reset plans of `kcoord groups reset-offsets --export` and
//! `--from-file`, in the format of `kafka-consumer-groups.sh`, so that a plan
//! exported by either tool can be reviewed, edited and applied with either:
//! one line per partition, `topic,partition,offset` when the command names
//! exactly one group and `group,topic,partition,offset` otherwise.
//!
//! Group ids may hold any character, commas and quotes included, so fields
//! are quoted as RFC 4180 says (in double quotes, quotes doubled) when they
//! need it, and quoted fields are read back; topic names never need it.

use std::borrow::Cow;
use std::collections::BTreeMap;

/// Partition → offset, for one group.
pub type Offsets = BTreeMap<(String, i32), i64>;

/// Group → its partitions' offsets.
pub type ResetPlan = BTreeMap<String, Offsets>;

/// The plan as CSV lines; `with_group` selects the four-column format.
pub fn export(plan: &ResetPlan, with_group: bool) -> String {
    let mut out = String::new();
    for (group, offsets) in plan {
        for ((topic, partition), offset) in offsets {
            if with_group {
                out.push_str(&quoted(group));
                out.push(',');
            }
            out.push_str(&format!("{},{partition},{offset}\n", quoted(topic)));
        }
    }
    out
}

/// Reads a plan. Three-column lines belong to `only_group`, which is given
/// when the command names exactly one group; four-column lines name their
/// group. Blank lines are skipped (an exported plan ends with one).
pub fn parse(text: &str, only_group: Option<&str>) -> Result<ResetPlan, String> {
    let mut plan = ResetPlan::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let at = |what: &str| format!("line {} of the reset plan ({line:?}): {what}", i + 1);
        let mut fields = fields(line).map_err(|e| at(&e))?;
        let (group, topic, partition, offset) = match (fields.len(), only_group) {
            (3, Some(group)) => {
                let offset = fields.pop().unwrap_or_default();
                let partition = fields.pop().unwrap_or_default();
                (group.to_string(), fields.pop().unwrap_or_default(), partition, offset)
            }
            (4, _) => {
                let offset = fields.pop().unwrap_or_default();
                let partition = fields.pop().unwrap_or_default();
                let topic = fields.pop().unwrap_or_default();
                (fields.pop().unwrap_or_default(), topic, partition, offset)
            }
            (3, None) => return Err(at("topic,partition,offset lines need exactly one --group")),
            _ => {
                return Err(at(if only_group.is_some() {
                    "expected topic,partition,offset or group,topic,partition,offset"
                } else {
                    "expected group,topic,partition,offset"
                }))
            }
        };
        let partition: i32 =
            partition.trim().parse().ok().filter(|p| *p >= 0).ok_or_else(|| at("the partition is not a number"))?;
        let offset: i64 =
            offset.trim().parse().ok().filter(|o| *o >= 0).ok_or_else(|| at("the offset is not a number"))?;
        plan.entry(group).or_default().insert((topic, partition), offset);
    }
    Ok(plan)
}

/// A field as CSV writes it: quoted only where it must be.
fn quoted(field: &str) -> Cow<'_, str> {
    if field.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", field.replace('"', "\"\"")))
    } else {
        Cow::Borrowed(field)
    }
}

/// The fields of one CSV line, quoted ones unquoted.
fn fields(line: &str) -> Result<Vec<String>, String> {
    let mut fields = Vec::new();
    let mut chars = line.chars().peekable();
    loop {
        let mut field = String::new();
        if chars.peek() == Some(&'"') {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') if chars.peek() == Some(&'"') => {
                        chars.next();
                        field.push('"');
                    }
                    Some('"') => break,
                    Some(c) => field.push(c),
                    None => return Err("a quoted field is not closed".into()),
                }
            }
            match chars.next() {
                None => {
                    fields.push(field);
                    return Ok(fields);
                }
                Some(',') => fields.push(field),
                Some(_) => return Err("a quoted field is followed by more than a comma".into()),
            }
        } else {
            loop {
                match chars.next() {
                    Some(',') => break,
                    Some('"') => return Err("a quote inside an unquoted field".into()),
                    Some(c) => field.push(c),
                    None => {
                        fields.push(field);
                        return Ok(fields);
                    }
                }
            }
            fields.push(field);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(entries: &[(&str, &str, i32, i64)]) -> ResetPlan {
        let mut plan = ResetPlan::new();
        for (g, t, p, o) in entries {
            plan.entry(g.to_string()).or_default().insert((t.to_string(), *p), *o);
        }
        plan
    }

    #[test]
    fn one_groups_plan_is_topic_partition_offset_and_several_groups_name_theirs() {
        let p = plan(&[("g", "orders", 0, 5), ("g", "orders", 1, 7)]);
        assert_eq!(export(&p, false), "orders,0,5\norders,1,7\n");
        let p = plan(&[("a", "t", 0, 1), ("b", "t", 0, 2)]);
        assert_eq!(export(&p, true), "a,t,0,1\nb,t,0,2\n");
    }

    #[test]
    fn an_exported_plan_reads_back_whatever_the_group_id_holds() {
        let p = plan(&[("g,1", "t", 0, 1), ("say \"hi\"", "t", 3, 9), ("plain", "u", 2, 0)]);
        let text = export(&p, true);
        assert!(text.starts_with("\"g,1\",t,0,1\n"), "{text}");
        assert_eq!(parse(&format!("{text}\n"), None).unwrap(), p);
        let one = plan(&[("g", "t", 0, 4)]);
        assert_eq!(parse(&export(&one, false), Some("g")).unwrap(), one);
        assert_eq!(parse("t,0,4\r\n", Some("g")).unwrap(), one, "CRLF lines");
    }

    #[test]
    fn a_plan_that_cannot_be_read_says_which_line_and_why() {
        let err = parse("t,0,4\n", None).unwrap_err();
        assert!(err.contains("line 1") && err.contains("exactly one --group"), "{err}");
        let err = parse("g,t,0,4\nt,x,1\n", Some("g")).unwrap_err();
        assert!(err.contains("line 2") && err.contains("partition"), "{err}");
        assert!(parse("t,0,-1\n", Some("g")).unwrap_err().contains("offset"));
        assert!(parse("t,0\n", Some("g")).unwrap_err().contains("expected"));
        assert!(parse("\"g,t,0,1\n", None).unwrap_err().contains("not closed"));
        assert!(parse("g\"x,t,0,1\n", None).unwrap_err().contains("quote"));
        assert!(parse("\"g\"x,t,0,1\n", None).unwrap_err().contains("more than a comma"));
    }
}
