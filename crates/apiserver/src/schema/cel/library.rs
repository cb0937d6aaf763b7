//! The parts of Kubernetes' CEL libraries that CRD rules use most and the `cel` crate does
//! not have: the list functions (`isSorted`, `sum`, `min`, `max`, `indexOf`,
//! `lastIndexOf`) and the regex functions (`find`, `findAll`).
//!
//! They work on any list through the crate's `Val` traits (ordering with `Comparer`, sums
//! with `Adder`, equality with `equals`), so they take ints, uints, doubles, strings and
//! whatever else the crate orders or adds. Errors are evaluation errors, reported as a cause.

use std::cmp::Ordering;

use cel::common::types::{CelBool, CelInt, CelList, CelString, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};
use regex::Regex;

/// Registers the functions on `env`.
pub(super) fn kubernetes(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![cel::common::types::DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![cel::common::types::DYN_TYPE],
        last_index_of,
    )?;
    cel::add_member_overload!(env, fn find: (CelString, CelString) -> Result<CelString>)?;
    cel::add_member_overload!(env, fn find_all: (CelString, CelString) -> Result<CelList>)?;
    cel::add_member_overload!(env, fn find_all_n: (CelString, CelString, CelInt) -> Result<CelList>,
        name = "findAll")?;
    Ok(())
}

/// The elements of a list argument.
fn elements<'b, 'v>(list: &'b (dyn Val + 'v)) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let Some(iterable) = list.as_iterable() else {
        return Err(ExecutionError::UnexpectedType {
            got: list.get_type().name().to_owned(),
            want: "list".to_owned(),
        });
    };
    let mut it = iterable.iter();
    let mut out = Vec::new();
    while let Some(x) = it.next() {
        out.push(x);
    }
    Ok(out)
}

fn one_arg<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let mut args = args.into_iter();
    match (args.next(), args.next()) {
        (Some(a), None) => Ok(a),
        _ => Err(ExecutionError::function_error(
            function,
            "expects no argument",
        )),
    }
}

fn two_args<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
) -> Result<(CowVal<'b, 'v>, CowVal<'b, 'v>), ExecutionError> {
    let mut args = args.into_iter();
    match (args.next(), args.next(), args.next()) {
        (Some(a), Some(b), None) => Ok((a, b)),
        _ => Err(ExecutionError::function_error(
            function,
            "expects one argument",
        )),
    }
}

fn compare(a: &dyn Val, b: &dyn Val) -> Result<Ordering, ExecutionError> {
    match a.as_comparer() {
        Some(c) => c.compare(b),
        None => Err(ExecutionError::function_error(
            "compare",
            format!("{} values are not ordered", a.get_type().name()),
        )),
    }
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = one_arg(args, "isSorted")?;
    let items = elements(list.as_ref())?;
    for pair in items.windows(2) {
        if compare(pair[0], pair[1])? == Ordering::Greater {
            return Ok(CowVal::owned(CelBool::from(false)));
        }
    }
    Ok(CowVal::owned(CelBool::from(true)))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = one_arg(args, "sum")?;
    let items = elements(list.as_ref())?;
    let Some((first, rest)) = items.split_first() else {
        return Ok(CowVal::owned(CelInt::from(0)));
    };
    let mut total: Box<dyn Val + 'v> = first.clone_as_boxed();
    for x in rest {
        let next = match total.as_adder() {
            Some(adder) => adder.add(*x)?.into_owned(),
            None => {
                return Err(ExecutionError::function_error(
                    "sum",
                    format!("{} values cannot be added", total.get_type().name()),
                ));
            }
        };
        total = next;
    }
    Ok(CowVal::Owned(total))
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    keep: Ordering,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = one_arg(args, function)?;
    let items = elements(list.as_ref())?;
    let Some((first, rest)) = items.split_first() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    let mut best = *first;
    for x in rest {
        if compare(*x, best)? == keep {
            best = *x;
        }
    }
    Ok(CowVal::Owned(best.clone_as_boxed()))
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", Ordering::Greater)
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let (list, wanted) = two_args(args, function)?;
    let items = elements(list.as_ref())?;
    let mut found = items
        .iter()
        .enumerate()
        .filter(|(_, x)| x.equals(wanted.as_ref()));
    let index = if last {
        found.next_back()
    } else {
        found.next()
    };
    let index = index.map_or(-1, |(i, _)| i64::try_from(i).unwrap_or(i64::MAX));
    Ok(CowVal::owned(CelInt::from(index)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, "indexOf", false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, "lastIndexOf", true)
}

fn regex(function: &str, pattern: &str) -> Result<Regex, ExecutionError> {
    Regex::new(pattern).map_err(|e| ExecutionError::function_error(function, e))
}

/// The first match of the regex, or `""`.
fn find<'v>(this: &CelString<'v>, re: &CelString<'_>) -> Result<CelString<'v>, ExecutionError> {
    let re = regex("find", re.inner())?;
    Ok(CelString::from(
        re.find(this.inner()).map_or("", |m| m.as_str()).to_string(),
    ))
}

/// Every match of the regex.
fn find_all<'v>(this: &CelString<'v>, re: &CelString<'_>) -> Result<CelList<'v>, ExecutionError> {
    matches_up_to(this, re, -1)
}

/// At most `n` matches of the regex (all when `n` is negative).
fn find_all_n<'v>(
    this: &CelString<'v>,
    re: &CelString<'_>,
    n: &CelInt,
) -> Result<CelList<'v>, ExecutionError> {
    matches_up_to(this, re, *n.inner())
}

fn matches_up_to<'v>(
    this: &CelString<'v>,
    re: &CelString<'_>,
    n: i64,
) -> Result<CelList<'v>, ExecutionError> {
    let re = regex("findAll", re.inner())?;
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let found: Vec<Box<dyn Val + 'v>> = re
        .find_iter(this.inner())
        .take(limit)
        .map(|m| Box::new(CelString::from(m.as_str().to_string())) as Box<dyn Val + 'v>)
        .collect();
    Ok(CelList::from(found))
}
