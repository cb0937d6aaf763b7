//! The checks for a scalar value: string length, pattern and format; number bounds and
//! `multipleOf`; `enum`.

use serde_json::{Number, Value};

use super::{Checks, Num, Path, Validator, go_float, is_json_integer, num, shown};
use crate::api::field::FieldError;
use crate::schema::Structural;

/// The bound, as the message prints it, when `value` is outside it.
fn out_of_bound(value: Num, bound: f64, exclusive: bool, lower: bool) -> Option<String> {
    match value {
        Num::Int(i) => {
            // Kubernetes compares integers with the bound truncated to an integer.
            let b = bound as i64;
            let bad = match (lower, exclusive) {
                (true, false) => i < b,
                (true, true) => i <= b,
                (false, false) => i > b,
                (false, true) => i >= b,
            };
            bad.then(|| b.to_string())
        }
        Num::Float(f) => {
            let bad = match (lower, exclusive) {
                (true, false) => f < bound,
                (true, true) => f <= bound,
                (false, false) => f > bound,
                (false, true) => f >= bound,
            };
            bad.then(|| go_float(bound))
        }
    }
}

fn not_multiple(f: f64, m: f64) -> Option<String> {
    let mult = if m < 1.0 { 1.0 / m * f } else { f / m };
    (!is_json_integer(mult)).then(|| go_float(m))
}

impl Validator<'_> {
    pub(super) fn string_checks(
        &mut self,
        s: &Structural,
        c: &Checks,
        st: &str,
        v: &Value,
        path: &Path,
    ) {
        if c.min_length.is_some() || c.max_length.is_some() {
            // Lengths are in characters; a string no longer in bytes needs no count.
            let len = st.len() as u64;
            let chars = || st.chars().count() as u64;
            if let Some(min) = c.min_length
                && (len < min || chars() < min)
            {
                let name = path.render();
                self.errs.push(FieldError::invalid(
                    self.field(&name),
                    v.clone(),
                    format!("{name} in body should be at least {min} chars long"),
                ));
            }
            if let Some(max) = c.max_length
                && len > max
                && chars() > max
            {
                let name = path.render();
                let mut e = FieldError::too_long(self.field(&name), max as usize);
                if max == 1 {
                    "may not be more than 1 byte".clone_into(&mut e.detail);
                }
                self.errs.push(e);
            }
        }
        if let Some(p) = &c.pattern
            && !p.regex.is_match(st)
        {
            let name = path.render();
            self.errs.push(FieldError::invalid(
                self.field(&name),
                v.clone(),
                format!("{name} in body should match '{}'", p.source),
            ));
        }
        if let Some(f) = c.format
            && !f.is_valid(st)
        {
            let name = path.render();
            let fmt_name = s.format.as_deref().unwrap_or_default();
            self.errs.push(FieldError::type_invalid(
                self.field(&name),
                v.clone(),
                format!("{name} in body must be of type {fmt_name}: {st:?}"),
            ));
        }
    }

    pub(super) fn number_checks(&mut self, c: &Checks, n: &Number, v: &Value, path: &Path) {
        let value = num(n);
        if let Some(m) = c.multiple_of {
            let bad = match value {
                Num::Int(i) if m.fract() == 0.0 && m >= 1.0 => {
                    let factor = m as i64;
                    (i % factor != 0).then(|| factor.to_string())
                }
                Num::Int(i) => not_multiple(i as f64, m),
                Num::Float(f) => not_multiple(f, m),
            };
            if let Some(factor) = bad {
                let name = path.render();
                self.errs.push(FieldError::invalid(
                    self.field(&name),
                    shown(v),
                    format!("{name} in body should be a multiple of {factor}"),
                ));
            }
        }
        if let Some(max) = c.maximum
            && let Some(bound) = out_of_bound(value, max, c.exclusive_maximum, false)
        {
            let op = if c.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            let name = path.render();
            self.errs.push(FieldError::invalid(
                self.field(&name),
                shown(v),
                format!("{name} in body should be {op} {bound}"),
            ));
        }
        if let Some(min) = c.minimum
            && let Some(bound) = out_of_bound(value, min, c.exclusive_minimum, true)
        {
            let op = if c.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            let name = path.render();
            self.errs.push(FieldError::invalid(
                self.field(&name),
                shown(v),
                format!("{name} in body should be {op} {bound}"),
            ));
        }
    }

    pub(super) fn check_enum(&mut self, c: &Checks, v: &Value, path: &Path) {
        let Some(values) = &c.enum_values else {
            return;
        };
        let found = values.iter().any(|e| match (e, v) {
            (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
            _ => e == v,
        });
        if !found {
            let allowed: Vec<&str> = c.enum_display.iter().map(String::as_str).collect();
            let name = path.render();
            self.errs.push(FieldError::not_supported(
                self.field(&name),
                shown(v),
                &allowed,
            ));
        }
    }
}
