//! Decoding the packed form straight into any `Deserialize` type: a serde `Deserializer`
//! over the bytes, with the sequence, map and enum accessors it hands out.

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

use super::compress::expand;
use super::strings::{format_time, format_uuid};
use super::{
    ARRAY, DIGITS, DecodeError, END, FALSE, FLOAT, NEGINT, NULL, OBJECT, STR, SYM, TIME, TRUE,
    UINT, UUID, ZSTR,
};

/// A serde deserializer over packed bytes.
pub(super) struct Decoder<'de> {
    pub(super) input: &'de [u8],
    pub(super) symbols: &'de [Box<str>],
    pub(super) references: &'de [Box<[u8]>],
}

impl<'de> Decoder<'de> {
    pub(super) fn byte(&mut self) -> Result<u8, DecodeError> {
        let (&b, rest) = self
            .input
            .split_first()
            .ok_or_else(|| DecodeError("unexpected end of packed data".into()))?;
        self.input = rest;
        Ok(b)
    }

    pub(super) fn peek(&self) -> Result<u8, DecodeError> {
        self.input
            .first()
            .copied()
            .ok_or_else(|| DecodeError("unexpected end of packed data".into()))
    }

    pub(super) fn varint(&mut self) -> Result<u64, DecodeError> {
        let mut n = 0u64;
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift >= 64 {
                return Err(DecodeError("varint overflows 64 bits".into()));
            }
            n |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(n);
            }
            shift += 7;
        }
    }

    pub(super) fn take(&mut self, n: usize) -> Result<&'de [u8], DecodeError> {
        if self.input.len() < n {
            return Err(DecodeError("unexpected end of packed data".into()));
        }
        let (head, rest) = self.input.split_at(n);
        self.input = rest;
        Ok(head)
    }

    pub(super) fn str_body(&mut self) -> Result<&'de str, DecodeError> {
        let len = usize::try_from(self.varint()?)
            .map_err(|_| DecodeError("string length overflows".into()))?;
        std::str::from_utf8(self.take(len)?).map_err(|e| DecodeError(e.to_string()))
    }

    pub(super) fn symbol(&mut self) -> Result<&'de str, DecodeError> {
        let id = usize::try_from(self.varint()?)
            .map_err(|_| DecodeError("symbol id overflows".into()))?;
        self.symbols
            .get(id)
            .map(|s| &**s)
            .ok_or_else(|| DecodeError(format!("unknown symbol {id}")))
    }

    /// A compressed string's text (after its tag).
    pub(super) fn compressed(&mut self) -> Result<String, DecodeError> {
        let reference = self.varint()?;
        let len = self.varint()?;
        let n = usize::try_from(self.varint()?)
            .map_err(|_| DecodeError("compressed length overflows".into()))?;
        let bytes = self.take(n)?;
        expand(self.references, reference, len, bytes)
    }

    pub(super) fn signed(&mut self) -> Result<i64, DecodeError> {
        match self.byte()? {
            UINT => i64::try_from(self.varint()?).map_err(|e| DecodeError(e.to_string())),
            NEGINT => {
                let n = i64::try_from(self.varint()?).map_err(|e| DecodeError(e.to_string()))?;
                Ok(-n - 1)
            }
            t => Err(DecodeError(format!("expected an integer, found tag {t}"))),
        }
    }
}

impl Decoder<'_> {
    /// Consumes the END of an array or object, skipping anything a visitor left unread.
    pub(super) fn finish(&mut self) -> Result<(), DecodeError> {
        while self.peek()? != END {
            de::Deserialize::deserialize(&mut *self).map(|de::IgnoredAny| ())?;
        }
        self.byte()?;
        Ok(())
    }
}

/// The elements of an array, or the entries of an object.
pub(super) struct Items<'a, 'de> {
    pub(super) de: &'a mut Decoder<'de>,
}

impl<'de> SeqAccess<'de> for Items<'_, 'de> {
    type Error = DecodeError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        if self.de.peek()? == END {
            return Ok(None);
        }
        seed.deserialize(&mut *self.de).map(Some)
    }
}

impl<'de> MapAccess<'de> for Items<'_, 'de> {
    type Error = DecodeError;

    fn next_key_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, DecodeError> {
        if self.de.peek()? == END {
            return Ok(None);
        }
        seed.deserialize(&mut *self.de).map(Some)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        seed.deserialize(&mut *self.de)
    }
}

/// An externally tagged enum variant: `{"Variant": value}`.
pub(super) struct Variant<'a, 'de> {
    pub(super) de: &'a mut Decoder<'de>,
}

impl<'de> de::EnumAccess<'de> for Variant<'_, 'de> {
    type Error = DecodeError;
    type Variant = Self;

    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self), DecodeError> {
        let v = seed.deserialize(&mut *self.de)?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for Variant<'_, 'de> {
    type Error = DecodeError;

    fn unit_variant(self) -> Result<(), DecodeError> {
        de::Deserialize::deserialize(&mut *self.de).map(|de::IgnoredAny| ())
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<T::Value, DecodeError> {
        seed.deserialize(&mut *self.de)
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_any(&mut *self.de, visitor)
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        de::Deserializer::deserialize_any(&mut *self.de, visitor)
    }
}

impl<'de> de::Deserializer<'de> for &mut Decoder<'de> {
    type Error = DecodeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        match self.byte()? {
            NULL => visitor.visit_unit(),
            FALSE => visitor.visit_bool(false),
            TRUE => visitor.visit_bool(true),
            UINT => visitor.visit_u64(self.varint()?),
            NEGINT => {
                let n = i64::try_from(self.varint()?).map_err(|e| DecodeError(e.to_string()))?;
                visitor.visit_i64(-n - 1)
            }
            FLOAT => {
                let b = self.take(8)?;
                let mut arr = [0u8; 8];
                arr.copy_from_slice(b);
                visitor.visit_f64(f64::from_le_bytes(arr))
            }
            STR => visitor.visit_borrowed_str(self.str_body()?),
            SYM => visitor.visit_borrowed_str(self.symbol()?),
            ZSTR => visitor.visit_string(self.compressed()?),
            UUID => visitor.visit_string(format_uuid(self.take(16)?)),
            DIGITS => visitor.visit_string(self.varint()?.to_string()),
            TIME => {
                let secs = self.signed()?;
                let s = format_time(secs).ok_or_else(|| DecodeError("bad timestamp".into()))?;
                visitor.visit_string(s)
            }
            ARRAY => {
                let v = visitor.visit_seq(Items { de: &mut *self })?;
                self.finish()?;
                Ok(v)
            }
            OBJECT => {
                let v = visitor.visit_map(Items { de: &mut *self })?;
                self.finish()?;
                Ok(v)
            }
            t => Err(DecodeError(format!("unexpected tag {t}"))),
        }
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, DecodeError> {
        if self.peek()? == NULL {
            self.byte()?;
            visitor.visit_none()
        } else {
            visitor.visit_some(self)
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, DecodeError> {
        match self.peek()? {
            OBJECT => {
                self.byte()?;
                let v = visitor.visit_enum(Variant { de: &mut *self })?;
                self.finish()?;
                Ok(v)
            }
            _ => {
                let name: String = de::Deserialize::deserialize(&mut *self)?;
                visitor.visit_enum(name.into_deserializer())
            }
        }
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct seq tuple tuple_struct map struct identifier ignored_any
    }
}
