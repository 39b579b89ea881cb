//! What the routes' `#[utoipa::path]` annotations and the derives cannot say in the OpenAPI
//! document, added once every route is in it ([`complete`]): the shared error responses
//! (`components/responses`), the answers every `/api/v1` route can give whatever it does (503
//! during start-up, 500), `uniqueItems` of a new webhook's events, and the cross-field rules
//! of request bodies as an `anyOf` or a
//! `oneOf` (a bulk approval names a filter; a schedule has an interval or `onChange: true`; a
//! what-if selects by exactly one of ids, a filter or a run; a token expires in seconds or at a
//! time, not both; a label selector's `values` go with its operator).
//!
//! Must not: describe a route's own answers (they stay in its annotation, beside the handler)
//! or the roles and their 401/403 (`auth::document_roles`). The integration test
//! `tests/api/docs.rs` checks the structural rules of the whole document (every response has a
//! description, `{param}` routes document `invalid_path`, JSON bodies 415 and `invalid_json`).

use utoipa::ToResponse;
use utoipa::openapi::schema::{
    AllOfBuilder, AnyOfBuilder, ArrayBuilder, ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type,
};
use utoipa::openapi::{OpenApi, Ref, RefOr};

use super::error::{Internal, NotReady, PayloadTooLarge, UnsupportedMediaType};

/// Finish the generated document (after `auth::document_roles`).
pub fn complete(openapi: &mut OpenApi) {
    let components = openapi.components.get_or_insert_with(Default::default);
    for (name, response) in [
        UnsupportedMediaType::response(),
        PayloadTooLarge::response(),
        NotReady::response(),
        Internal::response(),
    ] {
        components.responses.insert(name.to_string(), response);
    }
    let (not_ready, _) = NotReady::response();
    let (internal, _) = Internal::response();
    for (path, item) in openapi.paths.paths.iter_mut() {
        if !path.starts_with("/api/v1") {
            continue;
        }
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.patch,
        ];
        for operation in operations.into_iter().flatten() {
            let responses = &mut operation.responses.responses;
            responses
                .entry("500".into())
                .or_insert_with(|| Ref::from_response_name(internal).into());
            responses
                .entry("503".into())
                .or_insert_with(|| Ref::from_response_name(not_ready).into());
        }
    }

    // `POST /api/v1/decisions/approve` and `…/reject`: acting on every proposal at once needs
    // a filter.
    require_one_of(
        components,
        "BulkDecisionRequest",
        &[
            ("run", Type::Integer),
            ("plugin", Type::String),
            ("namespace", Type::String),
            ("node", Type::String),
            ("cluster", Type::String),
            ("profile", Type::String),
            ("pod", Type::String),
            ("ids", Type::Array),
        ],
    );
    // `POST /api/v1/clusters/{name}/what-if`: exactly one selection.
    require_exactly_one_of(
        components,
        "WhatIfRequest",
        &[
            ("decisions", Type::Array),
            ("filter", Type::Object),
            ("run", Type::Integer),
        ],
    );
    // `POST /api/v1/tokens`: an expiry in seconds or at a time, not both.
    forbid_together(components, "CreateToken", ("expiresIn", "expiresAt"));
    // `PUT /api/v1/profiles/{name}/auto-approve`: values name what `In` and `NotIn` match, and
    // `Exists` and `DoesNotExist` take none.
    label_selector_requirement(components);
    // `POST /api/v1/webhooks`: each event once (the derive has no `uniqueItems`).
    if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut("CreateWebhook")
        && let Some(RefOr::T(Schema::Array(events))) = object.properties.get_mut("events")
    {
        events.unique_items = true;
    }
    // A schedule runs periodically, after changes, or both: never neither.
    if let Some(schema) = components.schemas.remove("ScheduleRequest") {
        let interval = ObjectBuilder::new().required("intervalSeconds").property(
            "intervalSeconds",
            ObjectBuilder::new().schema_type(Type::Integer),
        );
        let on_change = ObjectBuilder::new().required("onChange").property(
            "onChange",
            ObjectBuilder::new()
                .schema_type(Type::Boolean)
                .enum_values(Some([true])),
        );
        let rule = AnyOfBuilder::new()
            .description(Some("intervalSeconds (not null), onChange: true, or both"))
            .item(interval)
            .item(on_change);
        components.schemas.insert(
            "ScheduleRequest".into(),
            RefOr::T(Schema::AllOf(
                AllOfBuilder::new().item(schema).item(rule).build(),
            )),
        );
    }
}

/// `schema` must hold at least one of `fields`, not null (its type is given).
fn require_one_of(
    components: &mut utoipa::openapi::Components,
    schema: &str,
    fields: &[(&str, Type)],
) {
    require_fields(components, schema, fields, false);
}

/// `schema` must hold exactly one of `fields`, not null (its type is given).
fn require_exactly_one_of(
    components: &mut utoipa::openapi::Components,
    schema: &str,
    fields: &[(&str, Type)],
) {
    require_fields(components, schema, fields, true);
}

/// `schema` combined (allOf) with a rule over `fields`: each alternative requires one of them,
/// and `exactly` makes the alternatives exclusive (oneOf) rather than inclusive (anyOf).
fn require_fields(
    components: &mut utoipa::openapi::Components,
    schema: &str,
    fields: &[(&str, Type)],
    exactly: bool,
) {
    let Some(original) = components.schemas.remove(schema) else {
        return;
    };
    let names = fields
        .iter()
        .map(|(name, _)| *name)
        .collect::<Vec<_>>()
        .join(", ");
    let alternatives = fields.iter().map(|(name, kind)| {
        let field = ObjectBuilder::new().schema_type(kind.clone());
        ObjectBuilder::new().required(*name).property(*name, field)
    });
    let rule = if exactly {
        let description = format!("exactly one of {names}, not null");
        let rule = alternatives.fold(
            OneOfBuilder::new().description(Some(description)),
            |rule, alternative| rule.item(alternative),
        );
        Schema::OneOf(rule.build())
    } else {
        let description = format!("at least one of {names}, not null");
        let rule = alternatives.fold(
            AnyOfBuilder::new().description(Some(description)),
            |rule, alternative| rule.item(alternative),
        );
        Schema::AnyOf(rule.build())
    };
    let combined = RefOr::T(Schema::AllOf(
        AllOfBuilder::new().item(original).item(rule).build(),
    ));
    components.schemas.insert(schema.into(), combined);
}

/// `schema` combined (allOf) with a rule: `a` and `b` are not both given (not null). Each
/// alternative holds when its field is absent or null.
fn forbid_together(
    components: &mut utoipa::openapi::Components,
    schema: &str,
    (a, b): (&str, &str),
) {
    let Some(original) = components.schemas.remove(schema) else {
        return;
    };
    let null = |field: &str| {
        ObjectBuilder::new().property(field, ObjectBuilder::new().schema_type(Type::Null))
    };
    let rule = AnyOfBuilder::new()
        .description(Some(format!("{a} or {b}, not both")))
        .item(null(a))
        .item(null(b));
    let combined = RefOr::T(Schema::AllOf(
        AllOfBuilder::new().item(original).item(rule).build(),
    ));
    components.schemas.insert(schema.into(), combined);
}

/// `LabelSelectorRequirement` combined (allOf) with apimachinery's rule: `In` and `NotIn` need
/// one or more values (each a label value), `Exists` and `DoesNotExist` none (absent, null or
/// empty), and no other operator.
fn label_selector_requirement(components: &mut utoipa::openapi::Components) {
    const SCHEMA: &str = "LabelSelectorRequirement";
    let Some(original) = components.schemas.remove(SCHEMA) else {
        return;
    };
    let operators = |names: [&str; 2]| {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .enum_values(Some(names))
    };
    let with_values = ObjectBuilder::new()
        .required("values")
        .property("operator", operators(["In", "NotIn"]))
        .property(
            "values",
            ArrayBuilder::new().min_items(Some(1)).items(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .max_length(Some(63))
                    .pattern(Some(crate::approval::LABEL_VALUE)),
            ),
        );
    let without_values = ObjectBuilder::new()
        .property("operator", operators(["Exists", "DoesNotExist"]))
        .property(
            "values",
            ArrayBuilder::new()
                .schema_type(SchemaType::Array(vec![Type::Array, Type::Null]))
                .max_items(Some(0)),
        );
    let rule = OneOfBuilder::new()
        .description(Some(
            "`In` or `NotIn` with one or more values; `Exists` or `DoesNotExist` without",
        ))
        .item(with_values)
        .item(without_values);
    let combined = RefOr::T(Schema::AllOf(
        AllOfBuilder::new().item(original).item(rule).build(),
    ));
    components.schemas.insert(SCHEMA.into(), combined);
}
